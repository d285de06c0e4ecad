"""Loading NNAL's ATB, as torch_npu does on the first ATB operator (tests only).

torch_npu registers its ATB operators (_npu_reshape_and_cache among them) as functions that
exist whatever the host has; the first call loads op-plugin's ATB library, which is linked
against NNAL's libatb.so (Ascend/op-plugin: op_plugin/python/atb/_atb_ops.py, lazy loading;
op_plugin/CMakeLists.txt, the link; op_plugin/utils/custom_functions/atb/AtbCommon.h, the
dlopen of "libatb.so"). The dynamic loader looks for libatb.so on LD_LIBRARY_PATH, which only
NNAL's nnal/atb/set_env.sh extends (the CANN environment-variable pages). When the load
fails, torch_npu raises an OSError that asks for the NNAL package, chained to the loader's
error, on every call.

Modelled: the library loads when a file named libatb.so lies in a directory of
LD_LIBRARY_PATH (read at each call, as a fresh process would see it); nothing is loaded.
"""
import os

NNAL_HINT = ("Please check that the nnal package is installed. "
             "Please run 'source set_env.sh' in the NNAL installation path.")


def found():
    """The libatb.so the dynamic loader would find, or None."""
    for d in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep):
        if d and os.path.isfile(os.path.join(d, "libatb.so")):
            return os.path.join(d, "libatb.so")
    return None


def load():
    if found() is None:
        cause = OSError("libatb.so: cannot open shared object file: No such file or directory "
                        "(conform CPU stand-in: no libatb.so on LD_LIBRARY_PATH)")
        raise OSError(None, NNAL_HINT) from cause
