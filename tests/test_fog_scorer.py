"""The FoG foresight scorer: forward/backward on a real tiny graph, far-to-near feedback, checkpoints.

Graphs are read from the real demo store and embedded with the real bundled MiniLM.
"""
from __future__ import annotations

import pytest
import torch

from localkg.errors import CheckpointError
from localkg.fog.checkpoint import load_checkpoint, save_checkpoint
from localkg.fog.features import QuestionGraph, TextVectors, bfs_levels, build_tensors
from localkg.fog.model import ForesightScorer, ScorerConfig, scatter_softmax
from localkg.store.model import Triple


@pytest.fixture(scope="module")
def vectors(scorer) -> TextVectors:
    return TextVectors(scorer.embedder)


def chain_graph(demo_kg) -> QuestionGraph:
    """Ginger Rogers —(in)starred→ Top Hat —directed_by→ Mark Sandrich —(in)directed_by→ another film:
    one triple per level 0→1, 1→2, 2→3, plus a distractor at level 0→1."""
    top_hat = next(t for t in demo_kg.triples("Ginger Rogers") if t.head.display == "Top Hat")
    director = next(t for t in demo_kg.triples("Top Hat") if t.relation == "directed_by")
    other_film = next(t for t in demo_kg.triples(director.tail.id)
                      if t.relation == "directed_by" and t.head.id != top_hat.head.id)
    distractor = next(t for t in demo_kg.triples("Ginger Rogers") if t.head.id != top_hat.head.id)
    triples = [top_hat, director, other_film, distractor]
    return QuestionGraph(questions=["Which films did the director of Top Hat make?"], triples=triples,
                         levels=bfs_levels(["Ginger Rogers"], triples), labels=[1.0, 1.0, 1.0, 0.0])


def test_forward_and_backward_on_a_tiny_graph(demo_kg, vectors):
    graph = chain_graph(demo_kg)
    assert [graph.levels[t.tail.id if graph.levels[t.head.id] < graph.levels.get(t.tail.id, 9) else t.head.id]
            for t in graph.triples[:3]] == [1, 2, 3]
    torch.manual_seed(0)
    model = ForesightScorer(ScorerConfig(encoder_dim=vectors.dim))
    tensors = build_tensors([graph], vectors)
    initial, refined = model(tensors)
    assert initial.shape == refined.shape == (4,)
    assert torch.isfinite(initial).all() and torch.isfinite(refined).all()
    labels = torch.tensor(graph.labels)
    distance = torch.tensor([3])  # the answer, the other film, lies three hops out
    plain = torch.from_numpy(vectors(["Which films did the director of make?"]))
    assert model.distance_logits(plain).shape == (1, model.config.max_level + 1)
    optimiser = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(30):
        initial, refined = model(tensors)
        loss = (torch.nn.functional.binary_cross_entropy_with_logits(initial, labels)
                + torch.nn.functional.binary_cross_entropy_with_logits(refined, labels)
                + torch.nn.functional.cross_entropy(model.distance_logits(plain), distance))
        optimiser.zero_grad()
        loss.backward()
        if not losses:
            missing = [name for name, p in model.named_parameters() if p.grad is None]
            assert not missing, f"parameters without gradient: {missing}"
        optimiser.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


def test_feedback_runs_far_to_near(demo_kg, vectors):
    """One feedback pass carries the farthest triple's signal back to the source's triple (so the
    far level was updated first), while no change near the sources reaches the far triples."""
    torch.manual_seed(0)
    model = ForesightScorer(ScorerConfig(encoder_dim=vectors.dim, feedback_layers=1)).eval()
    base = build_tensors([chain_graph(demo_kg)], vectors)
    with torch.no_grad():
        initial, refined = model(base)
        far_changed = build_tensors([chain_graph(demo_kg)], vectors)
        far_changed.relation_vectors[2] = torch.randn(vectors.dim)      # level 2→3 triple
        far_initial, far_refined = model(far_changed)
        near_changed = build_tensors([chain_graph(demo_kg)], vectors)
        near_changed.relation_vectors[0] = torch.randn(vectors.dim)     # level 0→1 triple
        _near_initial, near_refined = model(near_changed)
    assert torch.equal(far_initial[0], initial[0])              # without feedback, triple 0 cannot see it
    assert not torch.allclose(far_refined[0], refined[0])       # with one far-to-near pass it does
    assert torch.equal(near_refined[2], refined[2])             # nothing flows outward
    assert torch.equal(near_refined[1], refined[1])


def test_scatter_softmax_normalises_within_groups():
    weights = scatter_softmax(torch.tensor([1.0, 2.0, 3.0, 0.5]), torch.tensor([0, 0, 1, 1]), 3)
    assert torch.allclose(weights[:2].sum(), torch.tensor(1.0))
    assert torch.allclose(weights[2:].sum(), torch.tensor(1.0))
    assert weights[1] > weights[0]


def test_checkpoint_round_trip_and_refusals(demo_kg, vectors, tmp_path):
    torch.manual_seed(0)
    model = ForesightScorer(ScorerConfig(encoder_dim=vectors.dim, hidden=32)).eval()
    path = save_checkpoint(tmp_path / "fog" / "scorer.pt", model, "all-MiniLM-L6-v2", {"trained_on": "test"})
    loaded, meta = load_checkpoint(path, encoder="all-MiniLM-L6-v2")
    tensors = build_tensors([chain_graph(demo_kg)], vectors)
    with torch.no_grad():
        assert torch.equal(model(tensors)[1], loaded(tensors)[1])
    assert meta["trained_on"] == "test" and meta["encoder"] == "all-MiniLM-L6-v2"
    with pytest.raises(CheckpointError, match="encoder"):
        load_checkpoint(path, encoder="another-model")
    broken = tmp_path / "broken.pt"
    broken.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match="not a FoG scorer checkpoint"):
        load_checkpoint(broken)
    with pytest.raises(CheckpointError, match="no FoG scorer checkpoint"):
        load_checkpoint(tmp_path / "missing.pt")


def test_a_checkpoint_from_before_the_distance_head_still_loads(demo_kg, vectors, tmp_path):
    """Checkpoints written before the answer-distance head existed have no such config key."""
    model = ForesightScorer(ScorerConfig(encoder_dim=vectors.dim, hidden=32, answer_distance=False)).eval()
    path = save_checkpoint(tmp_path / "old.pt", model, "all-MiniLM-L6-v2", {})
    payload = torch.load(path, weights_only=True)
    del payload["config"]["answer_distance"]
    torch.save(payload, path)
    loaded, _meta = load_checkpoint(path)
    tensors = build_tensors([chain_graph(demo_kg)], vectors)
    assert loaded.distance_logits(torch.from_numpy(vectors(["Which films did make?"]))) is None
    with torch.no_grad():
        assert torch.equal(model(tensors)[1], loaded(tensors)[1])


def test_triples_the_same_level_carry_no_feedback(demo_kg, vectors):
    graph = chain_graph(demo_kg)
    tensors = build_tensors([graph], vectors)
    _near, _far, crossing = tensors.near_far()
    assert crossing.tolist() == [True, True, True, True]
    same_level = QuestionGraph(graph.questions, graph.triples[:1], {t: 0 for t in graph.levels})
    assert build_tensors([same_level], vectors).near_far()[2].tolist() == [False]
    assert isinstance(graph.triples[0], Triple)
