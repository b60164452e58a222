"""Lists in pages (`limit`, `continue`), as kube-apiserver serves them from etcd
(storage/etcd3/store.go GetList, storage/continue.go): a page of at most `limit` items, and
while more remain an opaque continue token and, when no selector filters the list,
`remainingItemCount`. Every page of one list is read at the first page's resourceVersion, so
the pages add up to one consistent list.

The token is upstream's: base64url (unpadded) of {"v": "meta.k8s.io/v1", "rv": N, "start":
"<key after the last item>"}. etcd keeps old revisions until it compacts them (every five
minutes, kube-apiserver's default); this store keeps none, so the first page keeps its list
aside for as long as etcd would keep the revision. A token whose list is gone (compacted,
evicted, or from another run) is 410 Expired with upstream's message and, as upstream, a
token with rv -1 that continues from the same key at the newest version (an inconsistent
list); a malformed one is 400.
"""

from __future__ import annotations

import base64
import bisect
import json
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable

from backend.local.registry.kinds import Kind
from backend.local.registry.status import ApiError, bad_request
from backend.local.registry.store import Store

COMPACTION_SECONDS = 300.0  # kube-apiserver's --etcd-compaction-interval
KEPT_LISTS = 32
TOKEN_VERSION = "meta.k8s.io/v1"
INCONSISTENT = ("The provided continue parameter is too old to display a consistent list result. You can start a new "
                "list without the continue parameter, or use the continue token in this response to retrieve the "
                "remainder of the results. Continuing with the provided token results in an inconsistent list - "
                "objects that were created, modified, or deleted between the time the first chunk was returned and "
                "now may show up in the list.")

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace or "", name): the store's order


def _key(obj: Obj) -> Key:
    return obj["metadata"].get("namespace", "") or "", obj["metadata"]["name"]


def encode_token(rv: int, start: Key, namespace: str | None) -> str:
    text = start[1] if namespace is not None or not start[0] else f"{start[0]}/{start[1]}"
    raw = json.dumps({"v": TOKEN_VERSION, "rv": rv, "start": text + "\x00"}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def decode_token(token: str, namespace: str | None, namespaced: bool) -> tuple[int, Key]:
    """(rv, the key to continue after); 400 for a token that is not one."""
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except ValueError as exc:
        raise bad_request(f"invalid continue token: invalid continue key: {exc}") from None
    if not isinstance(data, dict) or data.get("v") != TOKEN_VERSION:
        raise bad_request("invalid continue token: client sent unrecognized encoded version")
    rv, start = data.get("rv"), data.get("start")
    if not isinstance(rv, int) or isinstance(rv, bool) or rv == 0:
        raise bad_request("invalid continue token: inconsistent start revision")
    if not isinstance(start, str) or not start.rstrip("\x00"):
        raise bad_request("invalid continue token: empty start key")
    text = start.rstrip("\x00")
    if namespace is None and namespaced:
        ns, _, name = text.partition("/")
        return rv, (ns, name)
    return rv, (namespace or "", text)


@dataclass
class Page:
    items: list[Obj]
    rv: int
    token: str = ""
    remaining: int | None = None


class Pager:
    """The lists whose pages are being read, kept as etcd would keep their revision."""

    def __init__(self, store: Store, clock: Callable[[], float] = time.monotonic):
        self.store, self.clock = store, clock
        self._kept: OrderedDict[tuple[str, str, int], tuple[float, list[Obj]]] = OrderedDict()

    def _keep(self, kind: Kind, namespace: str | None, rv: int, items: list[Obj]) -> None:
        self._kept[(kind.key, namespace or "", rv)] = (self.clock(), items)
        while len(self._kept) > KEPT_LISTS:
            self._kept.popitem(last=False)

    def _kept_list(self, kind: Kind, namespace: str | None, rv: int) -> list[Obj] | None:
        for key, (made, _items) in list(self._kept.items()):
            if self.clock() - made > COMPACTION_SECONDS:
                del self._kept[key]
        found = self._kept.get((kind.key, namespace or "", rv))
        return None if found is None or rv < self.store.compacted else found[1]

    def page(self, kind: Kind, namespace: str | None, match: Callable[[Obj], bool], limit: int, token: str,
             filtered: bool) -> Page:
        """One page; `filtered`: a selector narrows the list (no remainingItemCount then)."""
        start: Key | None = None
        rv, everything, current = self.store.rv, None, True
        if token:
            asked, start = decode_token(token, namespace, kind.namespaced)
            if asked > 0:  # rv -1: continue at the newest version (the 410's token)
                everything = self._kept_list(kind, namespace, asked)
                if everything is None:
                    raise ApiError(410, "Expired", INCONSISTENT,
                                   list_meta={"continue": encode_token(-1, start, namespace)})
                rv, current = asked, False
        if everything is None:
            everything = self.store.list(kind, namespace)
        first = 0 if start is None else bisect.bisect_right([_key(o) for o in everything], start)
        matching = [o for o in everything[first:] if match(o)]
        if limit <= 0 or len(matching) <= limit:
            return Page(matching, rv)
        if current:
            self._keep(kind, namespace, rv, everything)
        shown = matching[:limit]
        return Page(shown, rv, encode_token(rv, _key(shown[-1]), namespace),
                    None if filtered else len(matching) - limit)
