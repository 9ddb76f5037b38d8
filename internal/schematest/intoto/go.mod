module github.com/cruxible/cruxprov/internal/schematest/intoto

go 1.26.0

require (
	github.com/CycloneDX/cyclonedx-go v0.12.0
	github.com/in-toto/attestation v1.2.0
	google.golang.org/protobuf v1.36.12
)
