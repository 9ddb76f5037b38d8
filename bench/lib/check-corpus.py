"""check-corpus.py SCRIPT MAKE_CORPUS DIR SIZE RUNTIME: is DIR the corpus SIZE names?

Run with the interpreter the corpus was packed from. make-corpus.py packs the distributions that
interpreter has installed, so one without some of them gives a smaller corpus (Debian's python3:
6 wheels of the medium's 30) and says nothing; figures measured on it under the name of the
medium corpus mislead. DIR passes when every distribution make-corpus.py lists for SIZE is packed
(and the fixtures' runtime wheel, when RUNTIME is 1) and its lock names each wheel once; it prints
one line saying so. Otherwise it says on stderr what is missing and how to get it, and exits 1.
"""
import importlib.metadata
import importlib.util
import json
import os
import re
import sys

script, make, out, size, runtime = sys.argv[1:]
spec = importlib.util.spec_from_file_location("make_corpus", make)
mc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mc)
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
RT = "cruxible-provider-runtime"
corpus = json.load(open(os.path.join(out, "corpus.json")))
packed = {p["name"] for p in corpus["packages"]}
with open(os.path.join(out, "pylock.toml")) as f:
    locked = len(re.findall(r"(?m)^\[\[packages\]\]$", f.read()))
want = mc.SIZES[size]
want = set(packed) if want is None else {norm(n) for n in want}
if runtime == "1":
    want.add(RT)
want = sorted(want)
missing = [n for n in want if n not in packed]
what = "%s (Python %s)" % (os.path.realpath(sys.executable), sys.version.split()[0])
if not missing and locked == len(packed) == corpus["wheels"]:
    print("corpus checked: the %s corpus, %d wheels (%d files), every one make-corpus.py lists for it, "
          "packed from %s" % (size, len(packed), corpus["files"], what))
    sys.exit(0)
installed = {norm(d.metadata["Name"]) for d in importlib.metadata.distributions() if d.metadata["Name"]}
absent = [n for n in missing if n not in installed and n != RT]
unpacked = [n for n in missing if n in installed]
why = []
if absent:
    why.append("not installed in that interpreter: " + ", ".join(absent))
if unpacked:
    why.append("installed there but not packed (no dist-info or no files make-corpus.py can read): "
               + ", ".join(unpacked))
if RT in missing:
    why.append("the fixtures' runtime wheel is not in it")
if locked != len(packed) or corpus["wheels"] != len(packed):
    why.append("its pylock.toml names %d packages and corpus.json counts %d wheels for the %d packed"
               % (locked, corpus["wheels"], len(packed)))
sys.stderr.write(
    "%s: the %s corpus is %d wheels, but the one packed from %s has %d (%d files), so nothing is "
    "measured: its figures would be for another corpus.\n  missing: %s.\n  to get it: give a CPython "
    "3.11 that has every one installed (python3 -m pip install them into one; the scripts' default "
    "interpreter, /root/.pyenv/versions/3.11.7/bin/python3.11, has them where it exists), or choose "
    "a corpus it has knowingly, CORPUS_SIZE=small or large where the script takes it.\n"
    % (script, size, len(want), what, len(packed), corpus["files"], "; ".join(why)))
sys.exit(1)
