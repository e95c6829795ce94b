"""A registry of named extension points (built-in policies, black-box tools): each entry is
registered once, by name, where it is defined, and read in the order it was registered."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, Protocol, TypeVar

__all__ = ["Registry"]


class _Named(Protocol):
    @property
    def name(self) -> str: ...


_Entry = TypeVar("_Entry", bound=_Named)


class Registry(Generic[_Entry]):
    """Entries by name, in registration order; ``kind`` names them in errors."""

    def __init__(self, kind: str) -> None:
        self._kind = kind
        self._entries: dict[str, _Entry] = {}

    def register(self, entry: _Entry) -> _Entry:
        """Adds ``entry``; a name is registered once (ValueError for a second time)."""
        if entry.name in self._entries:
            raise ValueError(f"a {self._kind} named {entry.name!r} is registered already")
        self._entries[entry.name] = entry
        return entry

    def unregister(self, name: str) -> None:
        """Removes the entry named ``name`` (for tests that register their own)."""
        del self._entries[name]

    def get(self, name: str) -> _Entry | None:
        return self._entries.get(name)

    def __getitem__(self, name: str) -> _Entry:
        return self._entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def names(self) -> list[str]:
        """Every registered name, in registration order."""
        return list(self._entries)

    def entries(self) -> list[_Entry]:
        """Every entry, in registration order."""
        return list(self._entries.values())

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)
