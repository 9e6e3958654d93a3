// Package archtest holds the test that keeps the import rules of DESIGN.md
// true; it has no code of its own.
package archtest
