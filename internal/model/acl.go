package model

// ACLBinding is one access control entry on one resource pattern, as Kafka
// stores it: who (Principal, from Host) may or may not (Permission) do
// Operation on the resources ResourceName names (PatternType: literal or
// prefixed). The numbers are Kafka's protocol codes for resource types,
// pattern types, operations and permissions.
type ACLBinding struct {
	ResourceType int8   `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	PatternType  int8   `json:"pattern_type"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    int8   `json:"operation"`
	Permission   int8   `json:"permission"`
}
