import os, sys
try:
    fd = os.dup(1)
except OSError as x:
    fd = x
else:
    try:
        os.dup2(2, 1)
    except OSError:
        n = os.open(os.devnull, os.O_WRONLY)
        os.dup2(n, 1)
        os.close(n)
sys.stdout = sys.stderr
err = None
try:
    import site
    site.main()
except BaseException as x:
    err = x
import cruxible_provider_runtime.harness as h
if hasattr(h, "run_bootstrapped"):
    h.run_bootstrapped(fd, err)
for f in (sys.stdout, sys.__stdout__):
    try:
        f.flush()
    except Exception:
        pass
if type(fd) is int:
    os.dup2(fd, 1)
    os.close(fd)
sys.stdout = sys.__stdout__
if err is not None:
    raise err
import runpy
runpy.run_module(h.__name__, run_name="__main__", alter_sys=True)
