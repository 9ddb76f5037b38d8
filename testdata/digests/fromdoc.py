"""A second implementation of docs/digests.md, written from its prose alone.

It shares no code with cruxprov's Go packages or with gen.mjs.

  fromdoc.py DOC
    recomputes the RFC 8785 examples, every typed vector (from the inputs the
    doc's "exact bytes hashed" paragraphs state), the seal content vectors
    (from seal-content.json, the doc's stated input) and the tree vectors
    (trees built on disk as the doc describes them, walked with lstat), and
    checks the canonical bytes and digests against the doc. TestDocProse
    (digest/) runs it.
  fromdoc.py --env ENV SEAL
    prints, as JSON, the tree digest of the directory ENV and the
    resolution, materialization and seal content digests of its seal
    document SEAL, computed as the doc says; TestEnvDigestsFromDocProse
    (cmd/cruxprov) compares them with what cruxprov prints for a real env.
  fromdoc.py --image LAYOUT DIGEST
    prints, as JSON, {platform: container materialization digest} of the
    image (one platform's manifest, or an image index) that DIGEST names in
    the OCI image layout LAYOUT, every blob it reads rehashed as the doc
    says; TestContainerDigestsFromDocProse (cmd/cruxprov) compares them with
    what image build prints, install pins and verify accepts.
"""

import hashlib
import json
import os
import re
import stat
import sys
import tempfile

problems = []
ABSENT = object()


def fail(msg):
    problems.append(msg)


# ---- RFC 8785 as "Canonical JSON (RFC 8785)" / "Output" describes it ----

SHORT_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}


def jcs_string(s):
    out = ['"']
    for ch in s:
        if ch in SHORT_ESCAPES:
            out.append(SHORT_ESCAPES[ch])
        elif ord(ch) < 0x20:
            out.append("\\u%04x" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def jcs_number(x):
    x = float(x)  # "a number is read as the nearest IEEE 754 double"
    if x != x or x in (float("inf"), float("-inf")):
        raise ValueError("not a finite number")
    if x == 0:
        return "0"  # -0 is 0
    sign = "-" if x < 0 else ""
    # The shortest decimal digits that read back as the same double: repr.
    r = repr(abs(x))
    mant, _, exp = r.partition("e")
    intpart, _, frac = mant.partition(".")
    if frac == "0":
        frac = ""
    digits = (intpart + frac).lstrip("0")
    lead = len(intpart + frac) - len((intpart + frac).lstrip("0"))
    # value = 0.<digits> x 10^n
    n = len(intpart) - lead + (int(exp) if exp else 0)
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        s = digits + "0" * (n - k)
    elif 0 < n <= 21:
        s = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        s = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        s = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + ("+" if e >= 0 else "-") + str(abs(e))
    return sign + s


def utf16_key(s):
    return s.encode("utf-16-be")  # big-endian bytes compare as code units


def jcs(v):
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, (int, float)):
        return jcs_number(v)
    if isinstance(v, str):
        return jcs_string(v)
    if isinstance(v, list):
        return "[" + ",".join(jcs(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(jcs_string(k) + ":" + jcs(v[k]) for k in sorted(v, key=utf16_key)) + "}"
    raise TypeError(type(v))


def parse_json(text):
    def no_dups(pairs):
        d = {}
        for k, v in pairs:
            if k in d:
                raise ValueError("duplicate name %r" % k)
            d[k] = v
        return d

    return json.loads(text, object_pairs_hook=no_dups)


def sha(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()



# ---- typed digests, as "Typed digests" describes their documents ----


def resolution(pkgs):
    """The resolution document: packages sorted by name (byte order), then filename."""
    pkgs = [{"name": p["name"], "version": p["version"], "filename": p["filename"], "sha256": p["sha256"]} for p in pkgs]
    pkgs.sort(key=lambda p: (p["name"].encode(), p["filename"].encode()))
    return {"type": "cruxible.resolution/v1", "packages": pkgs}


def local_materialization(version, platform, path, pyversion, resolution_digest, root, bytecode=None):
    """The local materialization document, v1 (no bytecode) or v2."""
    doc = {
        "type": "cruxible.materialization.local/v%d" % version,
        "platform": platform,
        "interpreter": {"path": path, "version": pyversion},
        "resolution": resolution_digest,
        "root": None if root is None else {"name": root["name"], "version": root["version"], "sha256": root["sha256"]},
    }
    if version == 2:
        doc["bytecode"] = bytecode
    return doc


# ---- the seal content digest, as its section lists the members ----


def seal_content(seal):
    """The seal content document: only the members the doc lists."""

    def take(obj, spec):
        obj = obj or {}
        out = {}
        for key, zero in spec.items():
            if key in obj:
                out[key] = obj[key]
            elif zero is not ABSENT:
                out[key] = zero
        return out

    def wheel(w):
        w = take(w, {"filename": "", "name": "", "sha256": None, "size": ABSENT, "version": ""})
        if not w.get("size"):
            w.pop("size", None)  # a size of 0 is absent
        return w

    m = seal.get("materialization") or {}
    r = seal.get("resolution") or {}
    interp = seal.get("interpreter") or {}
    lib = interp.get("libpython")
    doc = {
        "env": take(seal.get("env"), {"compiled": False, "python": "", "site_packages": ""}),
        "format": re.sub(r"^(cruxprov\.seal/v[0-9]+)\.[0-9]+$", r"\1", seal["format"]),
        "interpreter": dict(
            take(interp, {"implementation": "", "path": "", "sha256": None, "size": 0, "version": ""}),
            libpython=None if lib is None else take(lib, {"path": "", "sha256": None, "size": 0}),
        ),
        "materialization": dict(
            take(m, {"digest": None, "platform": "", "resolution": None}),
            interpreter=take(m.get("interpreter"), {"Path": "", "Version": ""}),
            root=None if m.get("root") is None else take(m["root"], {"name": "", "sha256": None, "version": ""}),
        ),
        "resolution": dict(
            take(r, {"digest": None, "platform": ""}),
            packages=None if r.get("packages") is None else [wheel(p) for p in r["packages"]],
        ),
        "tree": take(seal.get("tree"), {"bytes": 0, "digest": None, "dirs": 0, "files": 0, "root_mode": 0, "symlinks": 0}),
    }
    if m.get("bytecode") is not None:
        doc["materialization"]["bytecode"] = m["bytecode"]
    if r.get("root") is not None:
        doc["resolution"]["root"] = wheel(r["root"])
    return {"type": "cruxprov.seal-content/v1", "seal": doc}



# ---- the container materialization digest, as its section describes it ----

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


def container_materializations(image, blob):
    """image: the bytes the reference's digest names (one platform's manifest,
    or an image index); blob(digest): the bytes of a blob the image names, or
    None when it is not at hand (a vector holds no layers). Returns
    {platform: the bytes of its manifest}, the platform its config's label
    names: the materialization digest is their sha256, the bytes as they
    are."""

    def held(desc, need):
        b = blob(desc["digest"])
        if b is None:
            if need:
                raise ValueError("%s is not at hand" % desc["digest"])
            return None
        if sha(b) != desc["digest"] or len(b) != desc["size"]:
            raise ValueError("%s: the bytes hash to %s, %d bytes" % (desc["digest"], sha(b), len(b)))
        return b

    doc = parse_json(image)
    if doc.get("mediaType") == OCI_INDEX:
        manifests = [held(d, True) for d in doc["manifests"]]
    else:
        manifests = [image]
    out = {}
    for raw in manifests:
        m = parse_json(raw)
        if m.get("mediaType") != OCI_MANIFEST:
            raise ValueError("not an image manifest: %s" % m.get("mediaType"))
        config = parse_json(held(m["config"], True))
        for layer in m["layers"]:
            held(layer, False)
        out[config["config"]["Labels"]["dev.cruxible.platform"]] = raw
    return out


def layout_blob(layout):
    def blob(d):
        algo, _, hexd = d.partition(":")
        path = os.path.join(layout, "blobs", algo, hexd)
        if algo != "sha256" or not os.path.isfile(path):
            return None
        with open(path, "rb") as f:
            return f.read()
    return blob


def vector_blob(texts):
    by_digest = {sha(t.encode("utf-8")): t.encode("utf-8") for t in texts}
    return by_digest.get


# ---- the tree digest, as "Tree digest" describes the records ----


def tree_records(root):
    records = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/").encode("utf-8")
            st = os.lstat(full)
            if stat.S_ISDIR(st.st_mode):
                rec = b"D- 0 - " + rel + b"\0"
            elif stat.S_ISLNK(st.st_mode):
                target = os.readlink(os.fsencode(full))
                rec = b"L- %d %s %s\0" % (len(target), hashlib.sha256(target).hexdigest().encode(), rel)
            elif stat.S_ISREG(st.st_mode):
                body = open(full, "rb").read()
                x = b"x" if st.st_mode & 0o111 else b"-"
                rec = b"F%s %d %s %s\0" % (x, len(body), hashlib.sha256(body).hexdigest().encode(), rel)
            else:
                raise ValueError("special file %s" % rel)
            records.append((rel, rec))
    records.sort()
    return b"".join(r for _, r in records)


def built_tree(dirs, files, link):
    """The records of a tree built in a temporary directory: dirs, then
    files (path, bytes, mode), then one symlink (path, target)."""
    with tempfile.TemporaryDirectory() as root:
        for d in dirs:
            os.mkdir(os.path.join(root, d))
        for p, body, mode in files:
            with open(os.path.join(root, p), "wb") as f:
                f.write(body)
            os.chmod(os.path.join(root, p), mode)
        os.symlink(link[1], os.path.join(root, link[0]))
        return tree_records(root)



# ---- fromdoc.py DOC ----


def check_doc(doc_path):
    doc = open(doc_path, encoding="utf-8").read()
    table = dict(re.findall(r"(?m)^\| `([a-z0-9.-]+)` \|.*\| `(sha256:[0-9a-f]{64})` \|$", doc))
    checked = set()
    # The vectors whose canonical bytes the doc writes out.
    shown = {
        "implementation", "resolution", "resolution-empty", "interface",
        "materialization-local", "materialization-local-bare-lock",
        "materialization-local-v2-bytecode", "materialization-local-v2-no-bytecode",
        "materialization-local-v2-bare-lock-bytecode", "materialization-local-v2-bare-lock-no-bytecode",
    }

    def check(name, obj_or_bytes):
        """obj_or_bytes: a typed document (canonicalized here) or the exact bytes."""
        if isinstance(obj_or_bytes, bytes):
            b = obj_or_bytes
        else:
            c = jcs(obj_or_bytes)
            b = c.encode("utf-8")
            if name in shown and c not in doc:
                fail("%s: the doc does not show the canonical bytes computed from its prose:\n%s" % (name, c))
        got = sha(b)
        want = table.get(name)
        if want is None:
            fail("%s: no row in the doc's vector table" % name)
        elif got != want:
            fail("%s: the prose gives %s, the table says %s" % (name, got, want))
        checked.add(name)

    # The canonical JSON examples: rows "| `input` | `out` U+XXXX `out` |".
    n = 0
    for inp, cell in re.findall(r"(?m)^\| `([^`]+)` \| ((?:`[^`]+`|U\+[0-9A-F]{4,6})(?: (?:`[^`]+`|U\+[0-9A-F]{4,6}))*) \|$", doc):
        want = "".join(chr(int(t[2:], 16)) if t.startswith("U+") else t[1:-1] for t in re.findall(r"`[^`]+`|U\+[0-9A-F]{4,6}", cell))
        got = jcs(parse_json(inp))
        if got != want:
            fail("canonical example %s: the prose gives %r, the doc shows %r" % (inp, got, want))
        n += 1
    if n < 5:
        fail("found %d canonical JSON examples, want 5" % n)

    # The typed vectors, from the inputs "The exact bytes hashed for each" states.
    iface_digest = "sha256:c796d37c6d491e8f0c6e9b83eed34c15c0f377f9f0f3cbb3216fbbf776da6325"
    root_wheel = "sha256:f2e40bd921708484d61396975dcb95a39ab53d276d829a619ec9ec09452eba72"
    check("implementation", {
        "type": "cruxible.implementation/v1",
        "interface": {"id": "cruxible.example.summarize/v1", "digest": iface_digest},
        "entrypoint": {"name": "summarize", "object": "example_provider.summarize:Summarizer"},
        "distribution": root_wheel,
    })
    check("resolution", resolution([
        {"name": "requests", "version": "2.32.3", "filename": "requests-2.32.3-py3-none-any.whl",
         "sha256": "sha256:bd0c80ddb748e530fc1c4dec6b66909a820f246d37f72b3461438ce1fcd8a30a"},
        {"name": "certifi", "version": "2024.8.30", "filename": "certifi-2024.8.30-py3-none-any.whl",
         "sha256": "sha256:8f8e0cf064f1969db8cd0f729459bb3f86550f138a825338ccfbb197cc94de36"},
    ]))
    check("resolution-empty", resolution([]))
    local = ("cp311-manylinux_2_36_x86_64", "/usr/bin/python3.11", "3.11.2",
             "sha256:f7fbd5853d11940e045abc7c4d7b8e3253947bcde21b8cd8555d71c6f02fd912")
    root = {"name": "example-provider", "version": "1.0.0", "sha256": root_wheel}
    check("materialization-local", local_materialization(1, *local, root))
    check("materialization-local-bare-lock", local_materialization(1, *local, None))
    for suffix, r in (("", root), ("-bare-lock", None)):
        for bc_name, bc in (("-bytecode", "unchecked-hash"), ("-no-bytecode", None)):
            check("materialization-local-v2" + suffix + bc_name, local_materialization(2, *local, r, bc))
    m = re.search(r"\*\*interface\*\*: the schema document as shipped\n\n```\n(.*?)\n```", doc, re.S)
    if m is None:
        fail("interface: the doc does not show the schema document")
    else:
        check("interface", parse_json(m.group(1)))

    # The seal content vectors: the seal documents of seal-content.json.
    here = os.path.dirname(os.path.abspath(__file__))
    for v in json.load(open(os.path.join(here, "seal-content.json"), encoding="utf-8")):
        check(v["name"], seal_content(v["input"]))

    # The container materialization vectors: the images (and the blobs they
    # name) of materialization-container.json, the doc's stated inputs.
    for v in json.load(open(os.path.join(here, "materialization-container.json"), encoding="utf-8")):
        i = v["input"]
        got = container_materializations(i["image"].encode("utf-8"), vector_blob(i["blobs"]))
        if i["platform"] not in got:
            fail("%s: the image holds no image of platform %s (it holds %s)" % (v["name"], i["platform"], ", ".join(sorted(got))))
            continue
        check(v["name"], got[i["platform"]])
        if v["name"] == "materialization-container":
            m = re.search(r"\*\*materialization-container\*\*:.*?```\n(.*?)…\n```", doc, re.S)
            if m is None or not i["image"].startswith(m.group(1)):
                fail("materialization-container: the doc does not show the beginning of the manifest hashed")

    # The tree the doc's **tree** paragraph describes, built and walked.
    records = built_tree(("bin", "lib", "empty"), (("bin/tool", b"#!/bin/sh\necho hello\n", 0o755), ("lib/data.txt", b"hello, world\n", 0o644), ("lib.txt", b"", 0o644)), ("lib/current", "../bin/tool"))
    if records.decode("utf-8").replace("\0", "\\0\n") not in doc:
        fail("tree: the doc does not show the records computed from its prose")
    check("tree", records)
    tree = records
    # The **tree-utf8** paragraph's tree.
    records = built_tree(("\u00e9",), (("\uff21.txt", "caf\u00e9\n".encode(), 0o644), ("\U0001f600", b"#!/bin/sh\n", 0o755), ("\u00e9/na\u00efve.txt", b"", 0o644)), ("nowhere", "/nonexistent/\U0001f600"))
    if records.decode("utf-8").replace("\0", "\\0\n") not in doc:
        fail("tree-utf8: the doc does not show the records computed from its prose")
    check("tree-utf8", records)
    records = tree
    # The shell command the doc gives for it prints exactly these bytes' digest.
    m = re.search(r"```\n\$ printf '([^'\\]*(?:\\0[^'\\]*)*)' \| sha256sum\n(sha256:)?([0-9a-f]{64})  -\n```", doc)
    if m is None:
        fail("tree: no runnable printf | sha256sum command in the doc")
    elif m.group(1).replace("\\0", "\0").encode("utf-8") != records or "sha256:" + m.group(3) != table.get("tree"):
        fail("tree: the doc's printf command does not print the records, or not the tree's digest")

    missing = set(table) - checked
    if missing:
        fail("vector table rows this script does not recompute: %s" % ", ".join(sorted(missing)))
    return len(checked), n


# ---- fromdoc.py --env ENV SEAL ----


def env_digests(env, seal_path):
    seal = parse_json(open(seal_path, encoding="utf-8").read())
    m = seal["materialization"]
    major = int(re.match(r"^cruxprov\.seal/v([0-9]+)(\.[0-9]+)?$", seal["format"]).group(1))
    rd = sha(jcs(resolution(seal["resolution"]["packages"])).encode())
    md = local_materialization(major, m["platform"], m["interpreter"]["Path"], m["interpreter"]["Version"], m["resolution"], m["root"], m.get("bytecode"))
    return {
        "tree_digest": sha(tree_records(env)),
        "resolution_digest": rd,
        "materialization_digest": sha(jcs(md).encode()),
        "seal_content_digest": sha(jcs(seal_content(seal)).encode()),
    }


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--env":
        print(json.dumps(env_digests(sys.argv[2], sys.argv[3])))
        sys.exit(0)
    if len(sys.argv) == 4 and sys.argv[1] == "--image":
        blob = layout_blob(sys.argv[2])
        image = blob(sys.argv[3])
        if image is None or sha(image) != sys.argv[3]:
            sys.exit("fromdoc.py: %s holds no blob that hashes to %s" % (sys.argv[2], sys.argv[3]))
        print(json.dumps({p: sha(m) for p, m in container_materializations(image, blob).items()}))
        sys.exit(0)
    if len(sys.argv) != 2:
        sys.exit("usage: fromdoc.py DOC | fromdoc.py --env ENV SEAL | fromdoc.py --image LAYOUT DIGEST")
    vectors, examples = check_doc(sys.argv[1])
    for p in problems:
        print(p)
    if problems:
        sys.exit(1)
    print("ok: %d vectors and %d canonical JSON examples recomputed from the prose" % (vectors, examples))
