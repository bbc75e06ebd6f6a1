"""The traversal tree behind `kgr_search`: which entity was reached from which, and what is left.

One tree per traversal session. A search adds the searched entity under the explored entity
whose neighbours included it (the current one first, then the most recent), or as a new root
(a topic entity). Each explored entity keeps its neighbours ranked by relevance to the
question; backtracking walks up from the current entity and takes the first ancestor that
still has an unexplored neighbour, best first, stopping at the root.

Where trees live (`TraversalStore`): in a table keyed by a traversal key, which the tool
derives from the call (`kg_mcp.tools.traverse.traversal_key`). Every key belongs to a caller
(kg_mcp.calls.caller: the signed-in subject, else the client address, else the local client) and,
over HTTP, to the caller's MCP session when it has one; within that:

- an explicit session id (the tool's `session` argument): what a driver uses, one fresh random
  id per question. Another caller naming the same id reaches a tree of its own;
- without one, over stdio (one client per server process) or in-process: one traversal for the
  process;
- without one, over HTTP: the client's MCP session when it has one (the handshake-era
  protocol); otherwise nothing lasts between calls (the 2026 protocol is stateless), so every
  call starts a fresh tree and backtracking needs a session id.

A tree is also started afresh when a call brings a different question than the tree's. The
table keeps at most `per_caller` trees of one caller (its least recently used go first, so a
caller's many fresh session ids evict only its own trees), `max_sessions` in all and fewer when
together they hold more than `max_candidates` neighbours: then the least recently used tree of
the caller holding the most trees (or neighbours) goes first, never the tree in use. A tree holds
at most MAX_NODES explored entities, each with at most MAX_CANDIDATES neighbours (every entity a
search can show: top_k is at most 100), labels cut at LABEL_CHARS. A neighbour takes about 200
bytes, so the whole table stays within about 20 MB (STORE_CANDIDATES) however many clients
search hubs.

Clients behind one address without sign-in share a caller: they could name each other's
session ids (only KG data is in a tree); drivers use random ids.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from kg_mcp.errors import InvalidInput
from kg_mcp.quoting import clipped

MAX_SESSIONS = 128
TREES_PER_CALLER = 32
MAX_NODES = 50
MAX_CANDIDATES = 100  # = kgr_search's MAX_TOP_K: every neighbour a search can have shown
STORE_CANDIDATES = 100_000  # neighbours kept over all trees (about 200 bytes each)
LABEL_CHARS = 200
ID_CHARS = 1_000  # a longer id cannot be passed back as an argument anyway


@dataclass(frozen=True, slots=True)
class Candidate:
    """A neighbour entity of an explored one, with the relation that links them and its rank score."""

    id: str
    label: str | None
    relation: str  # compact id; `~rel` when the neighbour is the subject (walked backwards)
    score: float

    @classmethod
    def kept(cls, id: str, label: str | None, relation: str, score: float) -> Candidate:
        """A candidate as a tree keeps it: the label cut, the relation shared with its other uses."""
        return cls(id, clipped(label, LABEL_CHARS), sys.intern(relation), score)


@dataclass
class Node:
    id: str
    label: str | None
    parent: str | None
    via: str | None  # the relation from the parent to this entity (`~rel` = backwards)
    candidates: list[Candidate]  # distinct neighbour entities, best first

    def link_to(self, entity_id: str) -> Candidate | None:
        return next((c for c in self.candidates if c.id == entity_id), None)


@dataclass
class BacktrackStep:
    left: str  # the entity backtracked from
    climbed: list[str]  # ancestors passed because nothing was left under them
    parent: str | None  # where the offered neighbour hangs (None: nothing left anywhere)
    offered: Candidate | None


@dataclass
class Tree:
    question: str = ""
    nodes: dict[str, Node] = field(default_factory=dict)  # explored entities, in the order explored
    current: str | None = None
    candidates: int = 0  # neighbours kept over all its nodes
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def placement(self, entity_id: str) -> tuple[str | None, str | None]:
        """(parent, relation) for a newly explored entity: the current entity if it links to it,
        else the most recently explored entity that does; (None, None) for a new root."""
        order = list(self.nodes)
        if self.current in self.nodes:
            order.remove(self.current)
            order.append(self.current)
        for node_id in reversed(order):
            link = self.nodes[node_id].link_to(entity_id)
            if link is not None:
                return node_id, link.relation
        return None, None

    def add(self, node: Node) -> None:
        if node.id not in self.nodes and len(self.nodes) >= MAX_NODES:
            raise InvalidInput(
                f"This traversal has explored {MAX_NODES} entities, the most one session keeps.",
                "Answer from what you have, or start a new session.",
            )
        node.candidates = [c for c in node.candidates[:MAX_CANDIDATES] if len(c.id) <= ID_CHARS]
        if node.id not in self.nodes:
            self.candidates += len(node.candidates)
        self.nodes.setdefault(node.id, node)
        self.current = node.id

    def revisit(self, entity_id: str) -> None:
        self.current = entity_id

    def unexplored(self, node_id: str) -> Candidate | None:
        """The best neighbour of an explored entity that has not been explored itself."""
        return next((c for c in self.nodes[node_id].candidates if c.id not in self.nodes), None)

    def backtrack(self) -> BacktrackStep:
        """From the current entity up: the first ancestor with an unexplored neighbour, and that neighbour.

        From a root (a topic entity), its own next-best unexplored neighbour is offered: there is
        nothing above it to return to.
        """
        if self.current is None:
            raise InvalidInput(
                "Nothing to backtrack from: no entity has been searched in this traversal yet.",
                "Search a topic entity first; over HTTP, give every call of one traversal the same session id.",
            )
        left = self.current
        at = self.nodes[left].parent or left
        climbed: list[str] = []
        while True:
            offered = self.unexplored(at)
            if offered is not None:
                return BacktrackStep(left, climbed, at, offered)
            parent = self.nodes[at].parent
            if parent is None:
                return BacktrackStep(left, climbed + [at], None, None)
            climbed.append(at)
            at = parent

    def path(self, entity_id: str) -> list[str]:
        """Entity ids from the root down to `entity_id`."""
        out = [entity_id]
        while (parent := self.nodes[out[-1]].parent) is not None and parent not in out:
            out.append(parent)
        return out[::-1]


class TraversalStore:
    """Trees by traversal key: at most `per_caller` of one caller, `max_sessions` in all, holding at
    most about `max_candidates` neighbours together."""

    def __init__(
        self, max_sessions: int = MAX_SESSIONS, max_candidates: int = STORE_CANDIDATES, per_caller: int = TREES_PER_CALLER
    ):
        self.max_sessions = max_sessions
        self.max_candidates = max_candidates
        self.per_caller = per_caller
        self._trees: OrderedDict[str, Tree] = OrderedDict()  # least recently used first
        self._owners: dict[str, str] = {}  # key -> its caller
        self._lock = threading.Lock()

    def tree(self, key: str | None, question: str | None, caller: str = "local") -> Tree:
        """The tree for this call: a fresh one when none is kept under `key` (None: never kept)
        or the question changed. `caller` owns the key (kg_mcp.tools.traverse.traversal_key)."""
        with self._lock:
            tree = self._trees.get(key) if key is not None else None
            if tree is None or (question and tree.question and question != tree.question):
                tree = Tree(question=question or "")
                if key is not None:
                    self._trees[key] = tree
                    self._owners[key] = caller
            elif question and not tree.question:
                tree.question = question
            if key is not None:
                self._trees.move_to_end(key)
                self._bound(key, caller)
            return tree

    def _bound(self, used: str, caller: str) -> None:
        """Evict trees past the caller's quota, the count and the neighbour budget; never `used`."""
        mine = [k for k in self._trees if self._owners[k] == caller]
        for key in mine[: max(0, len(mine) - self.per_caller)]:
            self._evict(key)
        while len(self._trees) > self.max_sessions:
            self._evict(self._victim(used, lambda keys: len(keys)))
        held = sum(t.candidates for t in self._trees.values())
        while held > self.max_candidates and len(self._trees) > 1:
            victim = self._victim(used, lambda keys: sum(self._trees[k].candidates for k in keys))
            held -= self._trees[victim].candidates
            self._evict(victim)

    def _victim(self, used: str, weight) -> str:
        """The least recently used tree of the caller that holds the most (by `weight` of its keys)."""
        by_caller: dict[str, list[str]] = {}
        for key in self._trees:
            if key != used:
                by_caller.setdefault(self._owners[key], []).append(key)
        heaviest = max(by_caller.values(), key=weight)
        return heaviest[0]

    def _evict(self, key: str) -> None:
        del self._trees[key]
        del self._owners[key]

    def __len__(self) -> int:
        return len(self._trees)
