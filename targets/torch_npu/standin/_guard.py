"""Refuses to load a stand-in module when the real one is importable (shared by both)."""
import importlib.machinery
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def refuse_if_real(name):
    others = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
    spec = importlib.machinery.PathFinder.find_spec(name, others)
    if spec is not None:
        raise ImportError(
            "the conform CPU stand-in for `%s` refuses to load: a real `%s` is installed at %s"
            % (name, name, spec.origin or spec.submodule_search_locations)
        )
