// gen.mjs fills in the expected outputs of the digest vectors in this
// directory with an implementation independent of cruxprov's Go code:
// Node's JSON.parse / JSON.stringify (ECMAScript Number::toString and
// string escaping, which RFC 8785 adopts), a sort of keys by UTF-16 code
// units (JavaScript's default sort), and node:crypto's sha256.
//
// Usage: node testdata/digests/gen.mjs   (rewrites the files in place)
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const dir = dirname(fileURLToPath(import.meta.url));
const sha256 = (b) => "sha256:" + createHash("sha256").update(b).digest("hex");

// jcs serializes a parsed JSON value per RFC 8785.
function jcs(v) {
  if (v === null || typeof v !== "object") return JSON.stringify(v);
  if (Array.isArray(v)) return "[" + v.map(jcs).join(",") + "]";
  return "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + jcs(v[k])).join(",") + "}";
}

function save(name, cases) {
  writeFileSync(join(dir, name), "[\n" + cases.map((c) => " " + JSON.stringify(c)).join(",\n") + "\n]\n");
}

function load(name) {
  return JSON.parse(readFileSync(join(dir, name), "utf8"));
}

function typed(name, build) {
  const cases = load(name);
  for (const c of cases) {
    c.canonical = jcs(build(c.input));
    c.digest = sha256(Buffer.from(c.canonical, "utf8"));
  }
  save(name, cases);
}

typed("implementation.json", (i) => ({
  type: "cruxible.implementation/v1",
  interface: { id: i.interface_id, digest: i.interface_digest },
  entrypoint: { name: i.entrypoint, object: i.object },
  distribution: i.distribution,
}));

typed("resolution.json", (i) => ({
  type: "cruxible.resolution/v1",
  packages: [...i.packages]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.filename < b.filename ? -1 : 1))
    .map((p) => ({ name: p.name, version: p.version, filename: p.filename, sha256: p.sha256 })),
}));

typed("materialization-local.json", (i) => ({
  type: "cruxible.materialization.local/v1",
  platform: i.platform,
  interpreter: { path: i.interpreter.path, version: i.interpreter.version },
  resolution: i.resolution,
  root: i.root && { name: i.root.name, version: i.root.version, sha256: i.root.sha256 },
}));

typed("materialization-local-v2.json", (i) => ({
  type: "cruxible.materialization.local/v2",
  platform: i.platform,
  interpreter: { path: i.interpreter.path, version: i.interpreter.version },
  resolution: i.resolution,
  root: i.root && { name: i.root.name, version: i.root.version, sha256: i.root.sha256 },
  bytecode: i.bytecode,
}));

// The seal content document as docs/digests.md lists its members: only
// those (a member a later minor adds is not hashed), a missing one as its
// zero value, bytecode and resolution.root and a size of 0 left out when
// absent; the format as its major (v2.1 hashes as v2).
typed("seal-content.json", (i) => {
  const pick = (o, fields) => {
    const r = {};
    for (const [k, zero] of fields) if (o && o[k] !== undefined) r[k] = o[k]; else if (zero !== undefined) r[k] = zero;
    return r;
  };
  const file = (f) => f && pick(f, [["path", ""], ["sha256", null], ["size", 0]]);
  const wheel = (w) => pick(w, [["filename", ""], ["name", ""], ["sha256", null], ["size"], ["version", ""]]);
  const m = i.materialization || {};
  const r = i.resolution || {};
  const s = {
    env: pick(i.env, [["compiled", false], ["python", ""], ["site_packages", ""]]),
    format: i.format.replace(/^(cruxprov\.seal\/v[0-9]+)\.[0-9]+$/, "$1"),
    interpreter: { ...pick(i.interpreter, [["implementation", ""], ["path", ""], ["sha256", null], ["size", 0], ["version", ""]]), libpython: file(i.interpreter && i.interpreter.libpython) || null },
    materialization: {
      ...pick(m, [["bytecode"], ["digest", null], ["platform", ""], ["resolution", null]]),
      interpreter: pick(m.interpreter, [["Path", ""], ["Version", ""]]),
      root: m.root ? pick(m.root, [["name", ""], ["sha256", null], ["version", ""]]) : null,
    },
    resolution: { ...pick(r, [["digest", null], ["platform", ""]]), packages: r.packages ? r.packages.map(wheel) : null },
    tree: pick(i.tree, [["bytes", 0], ["digest", null], ["dirs", 0], ["files", 0], ["root_mode", 0], ["symlinks", 0]]),
  };
  if (m.bytecode === null) delete s.materialization.bytecode;
  if (r.root) s.resolution.root = wheel(r.root);
  for (const w of [...(s.resolution.packages || []), s.resolution.root]) if (w && !w.size) delete w.size;
  return { type: "cruxprov.seal-content/v1", seal: s };
});

typed("interface.json", (i) => JSON.parse(i));

// The container materialization digests: the sha256 of the bytes of the
// platform's image manifest as they are (never parsed and written again),
// the platform read from its config's label; from an image index, the
// manifest of the entry whose config names the platform. Every blob named
// (by the index, the manifest) must be among the inputs with that digest
// and size.
{
  const cases = load("materialization-container.json");
  for (const c of cases) {
    const blobs = new Map(c.input.blobs.map((b) => [sha256(Buffer.from(b, "utf8")), b]));
    const get = (d) => {
      const b = blobs.get(d.digest);
      if (b === undefined || Buffer.byteLength(b, "utf8") !== d.size) throw new Error(`${c.name}: no blob ${d.digest} of ${d.size} bytes`);
      return b;
    };
    const top = JSON.parse(c.input.image);
    const manifests = top.mediaType === "application/vnd.oci.image.index.v1+json" ? top.manifests.map(get) : [c.input.image];
    const found = manifests.filter((m) => {
      const mf = JSON.parse(m);
      if (mf.mediaType !== "application/vnd.oci.image.manifest.v1+json") throw new Error(`${c.name}: not an image manifest`);
      return JSON.parse(get(mf.config)).config.Labels["dev.cruxible.platform"] === c.input.platform;
    });
    if (found.length !== 1) throw new Error(`${c.name}: ${found.length} images of ${c.input.platform}`);
    c.digest = sha256(Buffer.from(found[0], "utf8"));
  }
  save("materialization-container.json", cases);
}

// Canonical JSON cases: only the accepted ones get an expected output.
{
  const cases = load("canonical.json");
  for (const c of cases) {
    if (c.error) continue;
    let input = c.input;
    if (c.input_repeat) input = c.input_repeat.prefix.repeat(c.input_repeat.count) + c.input_repeat.suffix.repeat(c.input_repeat.count);
    c.expected = jcs(JSON.parse(input));
  }
  save("canonical.json", cases);
}

// The trees: records computed from each description, sorted by path bytes.
for (const tree of ["tree", "tree-utf8"]) {
  const text = readFileSync(join(dir, tree + ".txtar"), "utf8");
  const parts = text.split(/^-- (.+) --\n/m);
  const entries = new Map();
  const addDirs = (p) => {
    const segs = p.split("/");
    for (let i = 1; i < segs.length; i++) {
      const d = segs.slice(0, i).join("/");
      if (!entries.has(d)) entries.set(d, { kind: "D" });
    }
  };
  for (let i = 1; i < parts.length; i += 2) {
    const [p, kind] = parts[i].split(" ");
    const body = Buffer.from(parts[i + 1], "utf8");
    addDirs(p);
    if (kind === "dir") entries.set(p, { kind: "D" });
    else if (kind === "symlink") entries.set(p, { kind: "L", body: Buffer.from(parts[i + 1].replace(/\n$/, ""), "utf8") });
    else entries.set(p, { kind: "F", exec: kind === "exec", body });
  }
  const paths = [...entries.keys()].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  let records = "";
  for (const p of paths) {
    const e = entries.get(p);
    const hex = e.body ? createHash("sha256").update(e.body).digest("hex") : "";
    if (e.kind === "D") records += `D- 0 - ${p}\0`;
    else if (e.kind === "L") records += `L- ${e.body.length} ${hex} ${p}\0`;
    else records += `F${e.exec ? "x" : "-"} ${e.body.length} ${hex} ${p}\0`;
  }
  const digest = sha256(Buffer.from(records, "utf8"));
  writeFileSync(join(dir, tree + ".txtar"), text.replace(/^digest: .*$/m, "digest: " + digest));
  writeFileSync(join(dir, tree + ".records"), records);
}
