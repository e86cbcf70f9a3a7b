"""One registry for every kind of plug-in: transcript formats, dream miners, model backends.

A :class:`Registry` holds named plug-ins of one kind. It fills itself on first use, in this
order, and the order is the order :meth:`Registry.items` returns (detection ties and the
default miner order follow it):

1. the built-ins, listed as ``"module:attribute"`` strings and imported lazily (a CLI verb
   that never imports a transcript pays for none of the importers);
2. the package entry points of the kind's group (``memdir.importers``, ``memdir.miners``,
   ``memdir.model_backends``), by entry-point name — the way an installed distribution adds a
   plug-in without code in the caller;
3. whatever code registered (:meth:`Registry.register`) before or after the first use.

The rules are the same for every kind:

- a name is lower-case letters, digits, ``-``, ``_`` or ``.``, starting with a letter or a
  digit, and not one the kind reserves (``offline`` is not a model backend);
- a second plug-in under a taken name is refused unless ``replace=True``; an entry point
  whose name a built-in holds is refused the same way (a distribution cannot silently replace
  a built-in; code that means to can);
- an entry point that fails to import, or whose object is not a plug-in of the kind, raises
  :class:`PluginError` naming the entry point, its distribution and what to do — at first use,
  loudly, because a silently missing miner or format changes results without a word;
- an unknown name raises :class:`~memdir.core.errors.InvalidInput` listing the known ones.

Each kind says how an object becomes a plug-in (``adapt``): an importer class is instantiated,
a miner factory and a backend factory are kept as they are.
"""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Callable, Iterable
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Generic, TypeVar

from memdir.core.errors import InvalidInput

__all__ = ["PluginError", "Registry", "check_name"]

T = TypeVar("T")
_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")


class PluginError(InvalidInput):
    """A plug-in could not be loaded or registered as it is."""

    type = "plugin"


def check_name(kind: str, name: object, reserved: Iterable[str] = ()) -> str:
    """``name`` if it may name a plug-in of ``kind``; else :class:`PluginError` saying why."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise PluginError(
            f"cannot register a {kind} named {name!r}: a name is 1-64 lower-case letters, "
            "digits, '-', '_' or '.', starting with a letter or a digit",
            kind=kind,
            name=repr(name),
        )
    if name in set(reserved):
        raise PluginError(
            f"cannot register a {kind} named {name!r}: the name is reserved", kind=kind, name=name
        )
    return name


class Registry(Generic[T]):
    """Named plug-ins of one kind (see the module docstring for the loading and error rules).

    ``name_of(obj)`` gives a built-in's name; ``adapt(obj)`` turns a loaded object into the
    plug-in (or raises :class:`TypeError` with what is wrong); ``detail`` is the key an unknown
    name is reported under in the error's details. Thread-safe; loading happens
    once per process (or after :meth:`reload`).
    """

    def __init__(
        self,
        kind: str,
        group: str,
        builtins: tuple[str, ...],
        *,
        name_of: Callable[[T], str],
        adapt: Callable[[Any], T],
        reserved: tuple[str, ...] = (),
        detail: str = "name",
    ) -> None:
        self.kind = kind
        self.group = group
        self.builtins = builtins
        self.reserved = reserved
        self.detail = detail
        self._name_of = name_of
        self._adapt = adapt
        self._lock = threading.RLock()
        self._loaded = False
        self._items: dict[str, T] = {}
        self._added: dict[str, T] = {}  # registered in code, kept across a reload

    # --- use ----------------------------------------------------------------------------

    def items(self) -> dict[str, T]:
        """Every plug-in by name: built-ins, then entry points, then code-registered ones."""
        self._load()
        with self._lock:
            return dict(self._items)

    def names(self) -> list[str]:
        return list(self.items())

    def get(self, name: str) -> T:
        """The plug-in named ``name``, or InvalidInput listing the known names."""
        known = self.items()
        found = known.get(name)
        if found is None:
            raise InvalidInput(
                f"unknown {self.kind} {name!r}; use one of {', '.join(sorted(known))}",
                **{self.detail: name},
            )
        return found

    # --- change -------------------------------------------------------------------------

    def register(self, name: str, plugin: T, *, replace: bool = False) -> None:
        """Add ``plugin`` under ``name``; a taken name needs ``replace=True``."""
        check_name(self.kind, name, self.reserved)
        self._load()
        with self._lock:
            if name in self._items and not replace:
                raise PluginError(
                    f"a {self.kind} named {name!r} is already registered; pass replace=True "
                    "to replace it",
                    kind=self.kind,
                    name=name,
                )
            self._items[name] = plugin
            self._added[name] = plugin

    def unregister(self, name: str) -> None:
        """Remove ``name`` (built-in or not) until the next :meth:`reload`; absent is fine."""
        self._load()
        with self._lock:
            self._items.pop(name, None)
            self._added.pop(name, None)

    def reload(self) -> None:
        """Read the built-ins and entry points again (after installing a distribution)."""
        with self._lock:
            self._loaded = False
        self._load()

    # --- loading ------------------------------------------------------------------------

    def _load(self) -> None:
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            found: dict[str, T] = {}
            for spec in self.builtins:
                module, _, attribute = spec.partition(":")
                plugin = self._adapt(getattr(importlib.import_module(module), attribute))
                found[self._name_of(plugin)] = plugin
            for point in sorted(entry_points(group=self.group), key=lambda p: p.name):
                if point.name in found:
                    raise self._bad(point, f"its name is taken by the built-in {self.kind}")
                check_name(self.kind, point.name, self.reserved)
                found[point.name] = self._load_point(point)
            self._items = {**found, **self._added}
            self._loaded = True

    def _load_point(self, point: EntryPoint) -> T:
        try:
            loaded = point.load()
        except Exception as error:  # any import-time failure of third-party code
            raise self._bad(
                point, f"it failed to import ({type(error).__name__}: {error})"
            ) from error
        try:
            return self._adapt(loaded)
        except TypeError as error:
            raise self._bad(point, str(error)) from error

    def _bad(self, point: EntryPoint, why: str) -> PluginError:
        dist = point.dist.name if point.dist is not None else "an unknown distribution"
        return PluginError(
            f"the {self.kind} entry point {point.name!r} = {point.value!r} of {dist} "
            f"(group {self.group}) cannot be used: {why}; fix or uninstall {dist}",
            kind=self.kind,
            entry_point=point.name,
            distribution=dist,
        )
