"""``.. cconv-automodules:: NAME [NAME ...]``: an ``automodule`` section per module that exists.

``NAME`` is a module (``cconv.dask``), documented when it is part of this cconv, or a package
followed by ``.*`` (``cconv.compat.*``), standing for each of its public submodules.  Modules
still being written, or left out of a build, are skipped instead of failing the build, and
new adapters appear without editing the pages.
"""

import importlib
import importlib.util
import pkgutil

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles


def public_modules(name):
    """The module ``name`` if it exists, or the public submodules of package ``name[:-2]``."""
    if name.endswith(".*"):
        package = importlib.import_module(name[:-2])
        return sorted(f"{package.__name__}.{info.name}"
                      for info in pkgutil.iter_modules(package.__path__)
                      if not info.name.startswith("_"))
    try:
        return [name] if importlib.util.find_spec(name) is not None else []
    except ImportError:  # a missing parent package
        return []


class CconvAutomodules(SphinxDirective):
    """The directive; its arguments are module names or ``package.*`` patterns."""

    required_arguments = 1
    optional_arguments = 50

    def run(self):
        lines = []
        for name in self.arguments:
            for module in public_modules(name):
                title = f"``{module}``"
                lines += [title, "-" * len(title), "", f".. automodule:: {module}",
                          "   :members:", ""]
        node = nodes.section()
        node.document = self.state.document
        nested_parse_with_titles(self.state, StringList(lines, source="cconv-automodules"),
                                 node)
        return node.children


def setup(app):
    app.add_directive("cconv-automodules", CconvAutomodules)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
