// Command intoto validates in-toto attestation Statements (v1) with the
// in-toto project's own Go bindings, github.com/in-toto/attestation: each
// FILE (a Statement as JSON) is read into the Statement message with
// protojson, which refuses a field the specification does not define or a
// value of the wrong type, and checked by its Validate (the _type, at
// least one subject, each with a digest of the right length, a predicate
// type and a predicate). A predicate of type https://slsa.dev/provenance/v1
// is read into the SLSA Provenance v1 message the same way and checked by
// its Validate (buildDefinition.buildType, externalParameters,
// runDetails.builder.id, each resolved dependency a valid
// ResourceDescriptor). The URI fields those validators leave alone are
// held to RFC 3986 as the specification's field types say (TypeURI,
// ResourceURI): absolute, scheme and authority lowercase.
//
// It is a module of its own so that cruxprov's go.mod does not carry the
// validator's dependencies; internal/schematest runs it for the tests.
// Each problem is a line on stderr; the exit status is 1 when any
// document is invalid.
package main

import (
	"fmt"
	"net/url"
	"os"
	"strings"

	slsa1 "github.com/in-toto/attestation/go/predicates/provenance/v1"
	ita1 "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"

	// The CycloneDX schemas the tests validate SBOMs against come with
	// this module (schema/); requiring it here pins them in go.sum.
	_ "github.com/CycloneDX/cyclonedx-go"
)

func main() {
	bad := false
	for _, f := range os.Args[1:] {
		for _, p := range check(f) {
			fmt.Fprintf(os.Stderr, "%s: %s\n", f, p)
			bad = true
		}
	}
	if bad {
		os.Exit(1)
	}
}

func check(file string) []string {
	b, err := os.ReadFile(file)
	if err != nil {
		return []string{err.Error()}
	}
	strict := protojson.UnmarshalOptions{}
	var st ita1.Statement
	if err := strict.Unmarshal(b, &st); err != nil {
		return []string{"not an in-toto Statement: " + err.Error()}
	}
	var out []string
	if st.GetType() != ita1.StatementTypeUri {
		out = append(out, fmt.Sprintf("_type %q, want %q", st.GetType(), ita1.StatementTypeUri))
	}
	if err := st.Validate(); err != nil {
		out = append(out, "statement: "+err.Error())
	}
	out = append(out, uri("predicateType", st.GetPredicateType())...)
	for i, s := range st.GetSubject() {
		out = append(out, descriptor(fmt.Sprintf("subject[%d]", i), s)...)
	}
	if st.GetPredicateType() != "https://slsa.dev/provenance/v1" {
		return out
	}
	raw, err := protojson.Marshal(st.GetPredicate())
	if err != nil {
		return append(out, "predicate: "+err.Error())
	}
	var p slsa1.Provenance
	if err := strict.Unmarshal(raw, &p); err != nil {
		return append(out, "not a SLSA Provenance v1 predicate: "+err.Error())
	}
	if err := p.Validate(); err != nil {
		out = append(out, "provenance: "+err.Error())
	}
	bd, rd := p.GetBuildDefinition(), p.GetRunDetails()
	out = append(out, uri("buildDefinition.buildType", bd.GetBuildType())...)
	out = append(out, uri("runDetails.builder.id", rd.GetBuilder().GetId())...)
	for i, d := range bd.GetResolvedDependencies() {
		out = append(out, descriptor(fmt.Sprintf("buildDefinition.resolvedDependencies[%d]", i), d)...)
	}
	for i, d := range rd.GetByproducts() {
		out = append(out, descriptor(fmt.Sprintf("runDetails.byproducts[%d]", i), d)...)
	}
	return out
}

func descriptor(where string, d *ita1.ResourceDescriptor) []string {
	var out []string
	if err := d.Validate(); err != nil {
		out = append(out, where+": "+err.Error())
	}
	if d.GetUri() != "" {
		out = append(out, uri(where+".uri", d.GetUri())...)
	}
	if d.GetDownloadLocation() != "" {
		out = append(out, uri(where+".downloadLocation", d.GetDownloadLocation())...)
	}
	return out
}

// uri holds s to the specification's TypeURI and ResourceURI: an RFC 3986
// URI, case normalized (scheme and authority lowercase).
func uri(where, s string) []string {
	u, err := url.Parse(s)
	if err != nil {
		return []string{fmt.Sprintf("%s %q is not a URI: %v", where, s, err)}
	}
	if u.Scheme == "" {
		return []string{fmt.Sprintf("%s %q is not an absolute URI (no scheme)", where, s)}
	}
	if u.Scheme != strings.ToLower(u.Scheme) || u.Host != strings.ToLower(u.Host) {
		return []string{fmt.Sprintf("%s %q: scheme and authority must be lowercase", where, s)}
	}
	return nil
}
