// Package api holds minimal Go types of opsuite's three custom resources, read from the same
// CRDs (charts/*/crds): only the fields the references use, with hand-written deep copies.
package api
