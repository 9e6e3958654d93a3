// Package recordfmt writes records as the console tools print them: a
// format string of kcat's kind (%k key, %v value, %p partition, ...), or
// one JSON object per line, and reads the lines a producer is given (an
// optional key separator, a record delimiter).
package recordfmt
