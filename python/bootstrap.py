import os, sys
a = sys.argv[1:]
e = dict(os.environ)
e.pop("CRUXIBLE_PROTOCOL_FD", None)
if sys.version_info < (3, 15) and sys.flags.utf8_mode and not e.get("LC_ALL") and e.get("LC_CTYPE") in ("C.UTF-8", "C.utf8", "UTF-8"):
    e["LC_CTYPE"] = "C"
try:
    fd = os.dup(1)
except OSError:
    pass
else:
    os.set_inheritable(fd, True)
    try:
        os.dup2(2, 1)
    except OSError:
        n = os.open(os.devnull, os.O_WRONLY)
        os.dup2(n, 1)
        os.close(n)
    e["CRUXIBLE_PROTOCOL_FD"] = str(fd)
try:
    os.execve(a[0], a, e)
except (OSError, IndexError) as x:
    os.write(2, ("cruxprov bootstrap: cannot run the harness %r: %s\n" % (a, x)).encode("utf-8", "replace"))
    os._exit(1)
