package main

import (
	"testing"

	"github.com/strandlog/strand/internal/testutil"
)

// TestMain removes the strand binary the tests built once they end.
func TestMain(m *testing.M) { testutil.Main(m) }
