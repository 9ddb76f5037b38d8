"""Validate CycloneDX JSON documents against the official schema.

usage: python3 cyclonedx.py SCHEMA_DIR BOM.json...

SCHEMA_DIR holds bom-1.5.schema.json and the schemas it refers to
(spdx.schema.json, jsf-0.82.schema*.json), as the CycloneDX/cyclonedx-go
module carries them; every $ref resolves by $id to those files, never over
the network. Formats the validator knows are checked too. Each error is
printed with its JSON path; the exit status is 1 when any document is
invalid, 2 when the validator cannot run.
"""

import glob
import json
import os
import sys
import warnings

try:
    import jsonschema
except ImportError:
    sys.stderr.write("no jsonschema module: apt-get install python3-jsonschema\n")
    sys.exit(2)

warnings.simplefilter("ignore", DeprecationWarning)


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    schema_dir, docs = argv[1], argv[2:]
    store = {}
    for path in glob.glob(os.path.join(schema_dir, "*.json")):
        with open(path, encoding="utf-8") as f:
            s = json.load(f)
        if isinstance(s, dict) and "$id" in s:
            store[s["$id"]] = s
    top = os.path.join(schema_dir, "bom-1.5.schema.json")
    with open(top, encoding="utf-8") as f:
        schema = json.load(f)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    resolver = jsonschema.RefResolver(schema["$id"], schema, store=store)
    v = cls(schema, resolver=resolver, format_checker=cls.FORMAT_CHECKER)
    bad = 0
    for doc in docs:
        with open(doc, encoding="utf-8") as f:
            inst = json.load(f)
        for e in sorted(v.iter_errors(inst), key=lambda e: list(e.absolute_path)):
            bad += 1
            path = "/".join(str(p) for p in e.absolute_path)
            print("%s: /%s: %s" % (doc, path, e.message))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
