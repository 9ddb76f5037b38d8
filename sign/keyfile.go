package sign

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cruxible/cruxprov/internal/aside"
	"github.com/cruxible/cruxprov/internal/atomicfile"
	"github.com/cruxible/cruxprov/refusal"
)

// PairOptions are what WritePair asks of its caller.
type PairOptions struct {
	// Password returns the private key's password: for a new key when
	// newKey (a caller that prompts asks twice), or to open the key an
	// interrupted WritePair left. It is called only once WritePair knows
	// which, and not at all when it refuses first.
	Password func(newKey bool) ([]byte, error)
	// Waiting, if set, is called once when another WritePair holds the
	// directory of the pair, before WritePair waits for it.
	Waiting func(dir string)
}

// PairErrorKind says why WritePair refused.
type PairErrorKind int

const (
	// PairExists: Path exists, and a key is never overwritten.
	PairExists PairErrorKind = iota + 1
	// PairForeign: PREFIX.key exists and is not what an interrupted
	// WritePair leaves (mode 0600, this user's); Detail names its mode
	// and owner.
	PairForeign
	// PairMismatch: PREFIX.pub (Path) is not the public key of
	// PREFIX.key (Other).
	PairMismatch
	// PairDamaged: PREFIX.key (Path) exists without PREFIX.pub (Other)
	// and is not a PEM private key.
	PairDamaged
	// PairWrongPassword: PREFIX.key (Path), kept from an interrupted
	// WritePair, does not open with the password given (Err).
	PairWrongPassword
	// PairEmptyPassword: Password returned an empty password; Path is
	// the kept key it was to open, or empty for a new key.
	PairEmptyPassword
	// PairWriteFailed: Path could not be written (Err); Other, when set,
	// is the private key kept (the completion of an interrupted pair).
	PairWriteFailed
	// PairDirFailed: the directory of the pair (Path) could not be made
	// (Err).
	PairDirFailed
)

// PairError is WritePair's refusal. It names no command-line flag: the
// caller knows what the prefix was called and says what to do.
type PairError struct {
	Kind   PairErrorKind
	Path   string
	Other  string
	Detail string
	Err    error
}

func (e *PairError) Error() string {
	switch e.Kind {
	case PairExists:
		return e.Path + " exists: not overwriting a key"
	case PairForeign:
		return fmt.Sprintf("%s exists (%s: not a key an interrupted key generate left, which is 0600 and its user's): not overwriting a key", e.Path, e.Detail)
	case PairMismatch:
		return fmt.Sprintf("%s is not the public key of %s: not overwriting a key", e.Path, e.Other)
	case PairDamaged:
		return fmt.Sprintf("%s exists without %s and is not a PEM private key (an older cruxprov's key generate killed while writing it leaves it empty or cut short)", e.Path, e.Other)
	case PairWrongPassword:
		return fmt.Sprintf("%s, kept from an interrupted key generate, does not open: %v; nothing was written", e.Path, e.Err)
	case PairEmptyPassword:
		if e.Path != "" {
			return fmt.Sprintf("an empty key password: %s, kept from an interrupted key generate, is encrypted", e.Path)
		}
		return "an empty key password: the private key is always encrypted"
	case PairWriteFailed:
		if e.Other != "" {
			return fmt.Sprintf("%s: %v (%s is kept)", e.Path, e.Err, e.Other)
		}
		return fmt.Sprintf("cannot write %s: %v", e.Path, e.Err)
	case PairDirFailed:
		return fmt.Sprintf("cannot make %s: %v", e.Path, e.Err)
	}
	return fmt.Sprintf("key pair %s: %v", e.Path, e.Err)
}

func (e *PairError) Unwrap() error { return e.Err }

// WritePair writes the key pair PREFIX.key (encrypted with the password
// Password gives, mode 0600) and PREFIX.pub (0644), or finishes the pair
// an interrupted WritePair left (completed). The private key is written
// first, then the public key, each whole or missing, never over a file
// (atomicfile.WriteNew, the directory synced), so a run killed at any
// point leaves nothing, PREFIX.key alone, or the pair, besides temp files
// (.tmp-BASE.key-N, .tmp-BASE.pub-N). Run again, it finds:
//   - neither file: a new pair, the temp files removed (a private key
//     that never got its name was never given to anyone);
//   - PREFIX.key alone: opened with the password given, its public key
//     written as PREFIX.pub (a wrong password writes nothing);
//   - the pair, with a temp file that is a second name of PREFIX.pub
//     (killed between its link and the temp's removal): the password
//     checked to open PREFIX.key, PREFIX.pub checked to be its public
//     key, the temp files removed;
//   - the pair otherwise, or PREFIX.pub alone: refused (PairExists): a
//     key is never overwritten.
//
// A missing directory of PREFIX is made, mode 0700 (it holds the key),
// and removed again when no key is written. Runs in one directory take
// turns (a flock on it), so that no run removes the temp file of another
// still writing it. ctx's end stops it while it waits and during the
// key's scrypt (encrypting a new key, opening a kept one), which do not
// look at ctx, before it writes anything. Every refusal is a *PairError,
// but for ctx's end and the errors of Password, returned as they are, and
// LoadPrivateKey's signer_untrusted for a kept key whose public key
// header is not its key's (no PREFIX.pub is written from it).
func WritePair(ctx context.Context, prefix string, o PairOptions) (pub *PublicKey, completed bool, err error) {
	// The pair's file operations in order on one thread: a tracer that
	// counts system calls per thread (strace's inject when=N, as
	// cmd/cruxprov's TestKeyGenerateKilled kills at each) sees them as
	// the sequence they are; the Go scheduler could otherwise split them
	// between threads, and the Nth would be no thread's Nth.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dir := filepath.Dir(prefix)
	made, err := mkdirSynced(dir, 0o700)
	if err != nil {
		return nil, false, &PairError{Kind: PairDirFailed, Path: dir, Err: err}
	}
	defer func() {
		// A run that wrote no key (no password, an interrupt at a
		// prompt) leaves no directory it made: os.Remove takes only
		// empty ones.
		if err != nil {
			for _, d := range made {
				os.Remove(d)
			}
		}
	}()
	unlock, err := lockDir(ctx, dir, o.Waiting)
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	keyPath, pubPath := prefix+".key", prefix+".pub"
	there := func(p string) (fs.FileInfo, bool) {
		fi, err := os.Lstat(p)
		return fi, err == nil || !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission)
	}
	kfi, key := there(keyPath)
	pfi, pubThere := there(pubPath)
	// Unreadable, the directory has no temp files to see; what is
	// written next fails on its own.
	keyTemps, _ := atomicfile.Temps(keyPath)
	pubTemps, _ := atomicfile.Temps(pubPath)
	temps := append(keyTemps, pubTemps...)
	regular := key && kfi != nil && kfi.Mode().IsRegular()
	// What WritePair writes: 0600, this user's. Another PREFIX.key was
	// not left by an interrupted run (a key readable by others, another
	// user's): it is refused as ever, not completed and called 0600.
	if regular {
		if st, ok := kfi.Sys().(*syscall.Stat_t); kfi.Mode().Perm() != 0o600 || ok && int(st.Uid) != os.Geteuid() {
			detail := fmt.Sprintf("mode %04o", kfi.Mode().Perm())
			if ok {
				detail += fmt.Sprintf(", owner uid %d", st.Uid)
			}
			return nil, false, &PairError{Kind: PairForeign, Path: keyPath, Detail: detail}
		}
	}
	switch {
	case !key && !pubThere:
		pub, err := newPair(ctx, o, prefix, temps)
		return pub, false, err
	case regular && !pubThere:
		priv, err := interruptedKey(ctx, o, keyPath, pubPath)
		if err != nil {
			return nil, false, err
		}
		removeAll(temps)
		if err := atomicfile.WriteNew(pubPath, priv.Public().PEM(), 0o644); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return nil, false, &PairError{Kind: PairExists, Path: pubPath}
			}
			return nil, false, &PairError{Kind: PairWriteFailed, Path: pubPath, Other: keyPath, Err: unwrapPath(err)}
		}
		return priv.Public(), true, nil
	case regular && pfi != nil && slices.ContainsFunc(pubTemps, func(t string) bool {
		fi, err := os.Lstat(t)
		return err == nil && os.SameFile(fi, pfi)
	}):
		priv, err := interruptedKey(ctx, o, keyPath, pubPath)
		if err != nil {
			return nil, false, err
		}
		if _, ok := samePublicKey(pubPath, priv.Public().PEM()); !ok {
			return nil, false, &PairError{Kind: PairMismatch, Path: pubPath, Other: keyPath}
		}
		removeAll(temps)
		if err := atomicfile.SyncDir(filepath.Dir(pubPath)); err != nil {
			return nil, false, &PairError{Kind: PairWriteFailed, Path: filepath.Dir(pubPath), Err: err}
		}
		return priv.Public(), true, nil
	case key:
		return nil, false, &PairError{Kind: PairExists, Path: keyPath}
	}
	return nil, false, &PairError{Kind: PairExists, Path: pubPath}
}

// newPair makes a key pair and writes it at prefix (WritePair), removing
// temps first. ctx's end stops it before it writes anything: the key's
// encryption (scrypt) does not look at ctx, and a signal during it ended
// the command only once the pair was written (aside.Run).
func newPair(ctx context.Context, o PairOptions, prefix string, temps []string) (*PublicKey, error) {
	pw, err := o.Password(true)
	if err != nil {
		return nil, err
	}
	if len(pw) == 0 {
		return nil, &PairError{Kind: PairEmptyPassword}
	}
	removeAll(temps)
	type pair struct{ priv, pub []byte }
	p, err := aside.Run(ctx, func() (pair, error) {
		priv, pub, err := Generate(pw)
		return pair{priv, pub}, err
	})
	if err != nil {
		return nil, err
	}
	priv, pub := p.priv, p.pub
	keyPath, pubPath := prefix+".key", prefix+".pub"
	if err := atomicfile.WriteNew(keyPath, priv, 0o600); err != nil {
		if errors.Is(err, fs.ErrExist) { // made meanwhile by another process
			return nil, &PairError{Kind: PairExists, Path: keyPath}
		}
		return nil, &PairError{Kind: PairWriteFailed, Path: keyPath, Err: err}
	}
	if err := atomicfile.WriteNew(pubPath, pub, 0o644); err != nil {
		// Where the directory could not be locked (lockDir), another
		// WritePair of this prefix may have found PREFIX.key alone
		// meanwhile and completed the pair (removing this run's
		// temp file, or linking PREFIX.pub first): the pair is whole,
		// and the key is not this run's to take back.
		if pk, ok := samePublicKey(pubPath, pub); ok {
			return pk, nil
		}
		// Half a pair whose writing failed (a full disk: not a kill,
		// which the same run again completes) is taken back: this run
		// made it and gave it to no one, and the retry with room makes
		// the pair. Not once PREFIX.pub is linked (the directory's sync
		// failed): that would leave it alone.
		if _, lerr := os.Lstat(pubPath); lerr != nil || errors.Is(err, fs.ErrExist) {
			os.Remove(keyPath)
			atomicfile.SyncDir(filepath.Dir(keyPath))
		}
		if errors.Is(err, fs.ErrExist) {
			return nil, &PairError{Kind: PairExists, Path: pubPath}
		}
		return nil, &PairError{Kind: PairWriteFailed, Path: pubPath, Err: err}
	}
	return ParsePublicKey(pub)
}

// samePublicKey reports whether the file path holds the public key pub
// (PEM), and returns it parsed.
func samePublicKey(path string, pub []byte) (*PublicKey, bool) {
	want, err := ParsePublicKey(pub)
	if err != nil {
		return nil, false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	got, err := ParsePublicKey(b)
	if err != nil || got.Digest() != want.Digest() {
		return nil, false
	}
	return want, true
}

// interruptedKey opens keyPath, the private key an interrupted WritePair
// left, with the password given (no confirmation: the key's decryption
// checks it). Neither a file that is not a PEM private key nor a wrong
// password changes anything, nor ctx's end during the decryption.
func interruptedKey(ctx context.Context, o PairOptions, keyPath, pubPath string) (*PrivateKey, error) {
	f, err := os.OpenFile(keyPath, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	f.Close()
	if err != nil {
		return nil, err
	}
	if blk, _ := pem.Decode(b); blk == nil || !strings.HasSuffix(blk.Type, "PRIVATE KEY") {
		return nil, &PairError{Kind: PairDamaged, Path: keyPath, Other: pubPath}
	}
	pw, err := o.Password(false)
	if err != nil {
		return nil, err
	}
	if len(pw) == 0 {
		return nil, &PairError{Kind: PairEmptyPassword, Path: keyPath}
	}
	k, err := aside.Run(ctx, func() (*PrivateKey, error) { return LoadPrivateKey(b, pw) })
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil, err
	}
	if refusal.CodeOf(err) != "" {
		// Not the password: the file's public key header is not its
		// key's (LoadPrivateKey says so); no .pub is written from it.
		return nil, err
	}
	if err != nil {
		return nil, &PairError{Kind: PairWrongPassword, Path: keyPath, Err: err}
	}
	return k, nil
}

// lockDir takes an exclusive flock(2) on the directory dir for one
// WritePair, waiting (calling waiting once) while another holds it, until
// ctx ends: the temp files a run finds there are then a killed run's,
// which the kernel's release of its lock tells from a live one's, and
// removing them takes no file from a run still writing it. Where the lock
// cannot be had at all (a directory this user may search but not read,
// a file system without flock, NFS's emulation of it, which needs a file
// open for writing), the run goes on without it: the lock keeps two runs
// of one prefix from failing each other, and no key depends on it (each
// file is written whole or not at all, never over another). unlock
// releases it.
func lockDir(ctx context.Context, dir string, waiting func(string)) (unlock func(), err error) {
	d, err := os.Open(dir)
	if err != nil {
		return func() {}, nil
	}
	fd := int(d.Fd())
	said := false
	for {
		err = syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { d.Close() }, nil // closing releases the lock
		}
		if err != syscall.EWOULDBLOCK && err != syscall.EINTR {
			d.Close()
			return func() {}, nil
		}
		if !said && waiting != nil {
			waiting(dir)
		}
		said = true
		select {
		case <-ctx.Done():
			d.Close()
			return nil, fmt.Errorf("key generate: %w while waiting for another key generate in %s; nothing was written", context.Cause(ctx), dir)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// removeAll removes the temp files of an interrupted run, best effort:
// one left is only a file more.
func removeAll(paths []string) {
	for _, p := range paths {
		os.Remove(p)
	}
}

// mkdirSynced makes dir and its missing parents with perm and syncs the
// parent of each it made: the key files' directory survives a power loss
// with them. It returns those it made, deepest first.
func mkdirSynced(dir string, perm os.FileMode) ([]string, error) {
	var made []string
	for d := dir; filepath.Dir(d) != d; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		made = append(made, d)
	}
	if err := os.MkdirAll(dir, perm); err != nil {
		return nil, err
	}
	for _, d := range made {
		if err := atomicfile.SyncDir(filepath.Dir(d)); err != nil {
			return made, err
		}
	}
	return made, nil
}

// unwrapPath is err without an *fs.PathError around it (the message
// names the path already).
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
