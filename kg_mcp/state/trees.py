"""A traversal tree as plain JSON data: what the shared store keeps and a worker process receives."""

from __future__ import annotations

from kg_mcp.kg_reasoner.traversal import Candidate, Node, Tree


def encode(tree: Tree) -> dict:
    """The tree as JSON-ready data (candidates as [id, label, relation, score] rows, the compact form)."""
    return {
        "question": tree.question,
        "current": tree.current,
        "nodes": [
            [n.id, n.label, n.parent, n.via, [[c.id, c.label, c.relation, c.score] for c in n.candidates]]
            for n in tree.nodes.values()
        ],
    }


def decode(data: dict) -> Tree:
    """The tree that `encode` wrote (a fresh lock; the neighbour count recomputed)."""
    tree = Tree(question=data.get("question") or "")
    for node_id, label, parent, via, candidates in data.get("nodes", []):
        node = Node(node_id, label, parent, via, [Candidate.kept(*c) for c in candidates])
        tree.nodes[node_id] = node
        tree.candidates += len(node.candidates)
    tree.current = data.get("current")
    return tree


def adopt(target: Tree, source: Tree) -> None:
    """Make `target` (the object a store holds) what `source` became, keeping target's lock."""
    target.question, target.nodes, target.current, target.candidates = (
        source.question, source.nodes, source.current, source.candidates)
