// Package image owns cruxprov's container backend (DESIGN §7): building a
// provider's image without a daemon, on a base pinned by digest, byte for
// byte reproducibly; signing it with its provenance and SBOM the way
// cosign stores them; writing it to an OCI layout or pushing it to a
// registry; and verifying an image fail-closed.
//
// Build runs the pipeline for each platform with materialize.Tree, so the
// env is laid out at EnvPath for the base's interpreter, found by reading
// the base's layers (never by running them) and its version read from
// CPython's PY_VERSION string in its files. The host's CPython at the same
// path and X.Y lays out the venv and compiles the bytecode; the
// provenance names it. Three layers go on the base: the env, cruxshim at
// ShimPath (the ENTRYPOINT) and the provider metadata (provider.toml,
// pylock.toml and the seal without host stats) at MetaDir; Harness is the
// CMD. Layers are gzip at GzipLevel over tar entries sorted by name, every
// mtime the caller's epoch (SOURCE_DATE_EPOCH), uid/gid 0, no user or
// group names, no PAX records, modes normalized (0755 directories and
// executables, 0644 files); the config's created and history carry the
// same epoch. The base's own layers are never recompressed, so its
// digests (and the pin) hold. Several platforms make an OCI index.
//
// Signing (Options.Key) stores, per manifest, a cosign simple-signing
// signature under the tag sha256-<hex>.sig and one image under
// sha256-<hex>.att with two DSSE envelopes: an in-toto Statement v1 with
// the SLSA v1 provenance predicate and one with a CycloneDX 1.5 SBOM
// (SBOM, from the seal alone, the same document `env sbom` prints). An
// index is signed too. In a layout, the tags are index.json entries'
// org.opencontainers.image.ref.name.
//
// Verify rehashes every manifest, config and blob it reads (a layout's
// blobs are not checked by go-containerregistry), requires the signature
// under a trusted key naming the digest and the repository (cosign never
// checks the latter), the signed provenance and SBOM about the digest, and
// the provenance to agree with the labels and the accepted pin:
// image_digest_mismatch, image_signature_invalid, provenance_mismatch.
// Every JSON document it decodes (and a build decodes of its base) is
// first held to say each key once (keys.go): a manifest, index, config
// or index.json that does not is image_digest_mismatch, a cosign
// document image_signature_invalid.
//
// It does not resolve, fetch or install (pipeline, materialize), hold
// keys (sign), decide which image an accepted pin names (registry), or
// run containers (the container executor). It never prints and never
// reads the environment: SOURCE_DATE_EPOCH, passwords and registry
// credentials come from the caller.
package image
