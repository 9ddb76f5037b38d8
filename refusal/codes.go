package refusal

// Code is a machine-readable refusal code: one of the constants below, a
// closed set (DESIGN §2). A Code is also an error so that
// errors.Is(err, refusal.HashMismatch) tests for it.
type Code string

// Error makes a Code usable as an errors.Is target.
func (c Code) Error() string { return string(c) }

// The codes, grouped as DESIGN §2 groups them.
const (
	// manifest
	ManifestMissing         Code = "manifest_missing"
	ManifestInvalid         Code = "manifest_invalid"
	EntrypointUnknown       Code = "entrypoint_unknown"
	InterfaceUnregistered   Code = "interface_unregistered"
	InterfaceDigestMismatch Code = "interface_digest_mismatch"
	InterfaceInvalid        Code = "interface_invalid"
	// lock
	LockMissing            Code = "lock_missing"
	LockInvalid            Code = "lock_invalid"
	LockVersionUnsupported Code = "lock_version_unsupported"
	PlatformUnsupported    Code = "platform_unsupported"
	NoCompatibleWheel      Code = "no_compatible_wheel"
	SdistNotAllowed        Code = "sdist_not_allowed"
	SourceNotAllowed       Code = "source_not_allowed"
	HashMissing            Code = "hash_missing"
	IndexNotPinned         Code = "index_not_pinned"
	DuplicatePackage       Code = "duplicate_package"
	// fetch
	FetchFailed  Code = "fetch_failed"
	HashMismatch Code = "hash_mismatch"
	SizeMismatch Code = "size_mismatch"
	OfflineMiss  Code = "offline_miss"
	// wheel
	WheelInvalid    Code = "wheel_invalid"
	WheelUnsafePath Code = "wheel_unsafe_path"
	RecordMissing   Code = "record_missing"
	RecordMismatch  Code = "record_mismatch"
	InstallConflict Code = "install_conflict"
	// env
	InterpreterMismatch Code = "interpreter_mismatch"
	MaterializeFailed   Code = "materialize_failed"
	// InterpreterUnverifiable: the verifying user cannot read the
	// interpreter (or its libpython), so it could not be checked.
	InterpreterUnverifiable Code = "interpreter_unverifiable"
	// verify
	PinUnapproved       Code = "pin_unapproved"
	PinMismatch         Code = "pin_mismatch"
	SealMissing         Code = "seal_missing"
	SealInvalid         Code = "seal_invalid"
	EnvDrift            Code = "env_drift"
	InterpreterDrift    Code = "interpreter_drift"
	ManifestDrift       Code = "manifest_drift"
	LockDrift           Code = "lock_drift"
	ProtocolUnsupported Code = "protocol_unsupported"
	// governance
	ChangesetInvalid Code = "changeset_invalid"
	ChangesetStale   Code = "changeset_stale"
	SignatureInvalid Code = "signature_invalid"
	SignerUntrusted  Code = "signer_untrusted"
	PinRollback      Code = "pin_rollback"
	PinExpired       Code = "pin_expired"
	RegistryCorrupt  Code = "registry_corrupt"
	// RegistryWriteFailed: a change to the registry could not be
	// written (its file system full, a quota used up, an I/O error),
	// which is no damage to the registry: registry_corrupt, whose
	// advice is to restore it from a trusted copy, would mean two
	// things (DESIGN §2).
	RegistryWriteFailed Code = "registry_write_failed"
	// RegistryUnreadable: the registry (a file or directory of it, or a
	// directory on the way to it) may not be read by this user (EACCES,
	// EPERM), which is no damage to the registry either: it was
	// registry_corrupt, whose advice is to restore the registry from a
	// trusted copy, one code for two meanings (DESIGN §2).
	RegistryUnreadable Code = "registry_unreadable"
	// run
	RuntimeMissing       Code = "runtime_missing"
	InputInvalid         Code = "input_invalid"
	InvokeFailed         Code = "invoke_failed"
	SecretUnresolved     Code = "secret_unresolved"
	SecretBundleTooLarge Code = "secret_bundle_too_large"
	// image
	BaseImageUnpinned     Code = "base_image_unpinned"
	ImageDigestMismatch   Code = "image_digest_mismatch"
	ImageSignatureInvalid Code = "image_signature_invalid"
	ProvenanceMismatch    Code = "provenance_mismatch"
	// PushFailed: a built image was not pushed into its
	// registry (not reached, credentials refused, a registry that takes
	// no pushes, its own failure); fetch_failed was used for it, one
	// code for two meanings, which DESIGN §2 forbids.
	PushFailed Code = "push_failed"
	// ledger
	LedgerWriteFailed   Code = "ledger_write_failed"
	LedgerCorrupt       Code = "ledger_corrupt"
	IdempotencyConflict Code = "idempotency_conflict"
	// container
	ContainerUnavailable Code = "container_unavailable"
)

var all = []Code{
	ManifestMissing,
	ManifestInvalid,
	EntrypointUnknown,
	InterfaceUnregistered,
	InterfaceDigestMismatch,
	InterfaceInvalid,
	LockMissing,
	LockInvalid,
	LockVersionUnsupported,
	PlatformUnsupported,
	NoCompatibleWheel,
	SdistNotAllowed,
	SourceNotAllowed,
	HashMissing,
	IndexNotPinned,
	DuplicatePackage,
	FetchFailed,
	HashMismatch,
	SizeMismatch,
	OfflineMiss,
	WheelInvalid,
	WheelUnsafePath,
	RecordMissing,
	RecordMismatch,
	InstallConflict,
	InterpreterMismatch,
	MaterializeFailed,
	InterpreterUnverifiable,
	PinUnapproved,
	PinMismatch,
	SealMissing,
	SealInvalid,
	EnvDrift,
	InterpreterDrift,
	ManifestDrift,
	LockDrift,
	ProtocolUnsupported,
	ChangesetInvalid,
	ChangesetStale,
	SignatureInvalid,
	SignerUntrusted,
	PinRollback,
	PinExpired,
	RegistryCorrupt,
	RegistryWriteFailed,
	RegistryUnreadable,
	RuntimeMissing,
	InputInvalid,
	InvokeFailed,
	SecretUnresolved,
	SecretBundleTooLarge,
	BaseImageUnpinned,
	ImageDigestMismatch,
	ImageSignatureInvalid,
	ProvenanceMismatch,
	PushFailed,
	LedgerWriteFailed,
	LedgerCorrupt,
	IdempotencyConflict,
	ContainerUnavailable,
}

// Codes returns every code, in the order of DESIGN §2.
func Codes() []Code { return append([]Code(nil), all...) }

// Known reports whether c is one of the codes.
func Known(c Code) bool {
	for _, k := range all {
		if k == c {
			return true
		}
	}
	return false
}
