"""The bundled MiniLM embedder and the relevance scorer (real model, loaded once per session)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from localkg.errors import ModelNotFoundError
from localkg.indexes.embedding import DEFAULT_MODEL_NAME, Embedder, default_model_path

METAQA_RELATIONS = ["starred_actors", "has_tags", "written_by", "release_year", "directed_by", "has_genre",
                    "in_language", "has_imdb_rating", "has_imdb_votes"]


@pytest.fixture(scope="module")
def embedder(scorer) -> Embedder:
    return scorer.embedder


def test_vectors_are_unit_float32_and_deterministic(embedder: Embedder) -> None:
    vectors = embedder.encode(["Ginger Rogers", "Top Hat", "who directed Top Hat"])
    assert vectors.shape == (3, embedder.dim) and embedder.dim == 384
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(embedder.encode(["Top Hat"])[0], vectors[1], rtol=1e-5, atol=1e-6)
    assert embedder.model_name == DEFAULT_MODEL_NAME
    assert embedder.encode([]).shape == (0, 384)


def test_similar_names_are_closer_than_unrelated_ones(embedder: Embedder) -> None:
    a, b, c = embedder.encode(["Ginger Rogers", "Ginger Rodgers", "The Departed"])
    assert a @ b > 0.8 > a @ c


def test_default_model_comes_from_the_installed_package() -> None:
    path = default_model_path()
    assert "site-packages" in str(path) and (path / "modules.json").is_file()


#: Texts that exercise what sentence-transformers does before the model: stripping, lowercasing
#: (the tokenizer's), accents, a text longer than the 256 tokens kept, an empty one.
TEXTS = ["who directed [Top Hat]", "  Ginger Rogers  ", "starred_actors", "Ünïcödé naïve café 東京", "",
         " ".join(["word"] * 400), "WHICH FILMS DID MARK SANDRICH DIRECT?", "in language"]


def sentence_transformers_vectors(path: Path, texts: list[str]) -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
    return model.encode(texts, batch_size=4, convert_to_numpy=True, normalize_embeddings=True)


def test_the_bundled_model_gives_sentence_transformers_vectors_without_it(embedder: Embedder) -> None:
    """The bundled MiniLM runs on torch alone (localkg/indexes/bert.py); its vectors are those
    sentence-transformers gives, to float rounding, batched or one at a time."""
    expected = sentence_transformers_vectors(embedder.model_path, TEXTS)
    np.testing.assert_allclose(embedder.encode(TEXTS, batch_size=3), expected, atol=1e-6)
    np.testing.assert_allclose(np.stack([embedder.encode([text])[0] for text in TEXTS]), expected, atol=1e-6)


def test_a_model_of_another_kind_is_read_by_sentence_transformers(embedder: Embedder, tmp_path: Path) -> None:
    """A model the torch-only encoder does not run (here the bundled one with [CLS] pooling)
    still embeds, as sentence-transformers reads it."""
    import json
    import shutil

    model = tmp_path / "cls-model"
    shutil.copytree(embedder.model_path, model, ignore=shutil.ignore_patterns("model.safetensors"))
    (model / "model.safetensors").symlink_to(embedder.model_path / "model.safetensors")
    pooling = model / "1_Pooling" / "config.json"
    pooling.write_text(json.dumps({**json.loads(pooling.read_text()), "pooling_mode_cls_token": True,
                                   "pooling_mode_mean_tokens": False}))
    vectors = Embedder(model, device="cpu").encode(TEXTS[:3])
    np.testing.assert_allclose(vectors, sentence_transformers_vectors(model, TEXTS[:3]), atol=1e-6)
    assert not np.allclose(vectors, embedder.encode(TEXTS[:3]), atol=1e-3)  # [CLS], not the mean


def test_a_directory_that_is_no_model_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="not a sentence-transformers model"):
        Embedder(tmp_path)


@pytest.mark.parametrize("question", [
    "who directed Top Hat",
    "who was the director of [Blonde Venus]",
    "the film [Simon] was directed by who",
    "which person directed The Departed?",
])
@pytest.mark.parametrize("spelling", ["id", "label"])
def test_directed_by_ranks_first_for_who_directed_questions(scorer, question: str, spelling: str) -> None:
    texts = METAQA_RELATIONS if spelling == "id" else [r.replace("_", " ") for r in METAQA_RELATIONS]
    best, _ = scorer.rank(question, texts, k=1)[0]
    assert METAQA_RELATIONS[best] == "directed_by"


def test_rank_orders_by_score_and_honours_k(scorer) -> None:
    ranked = scorer.rank("what language is Top Hat in", METAQA_RELATIONS)
    scores = [s for _, s in ranked]
    assert scores == sorted(scores, reverse=True) and len(ranked) == 9
    assert METAQA_RELATIONS[ranked[0][0]] == "in_language"
    assert len(scorer.rank("what language is Top Hat in", METAQA_RELATIONS, k=3)) == 3
    assert scorer.rank("anything", []) == []


def test_score_is_cosine_plus_shared_stems(scorer) -> None:
    from localkg.indexes.scoring import LEXICAL_WEIGHT

    texts = ["directed_by", "starred_actors"]
    cosine = scorer.cosine("who is the director of Top Hat", texts)
    hybrid = scorer.score("who is the director of Top Hat", texts)
    np.testing.assert_allclose(hybrid, cosine + LEXICAL_WEIGHT * np.array([1.0, 0.0]), rtol=1e-5)


def test_scorer_embeds_each_question_and_text_once(embedder: Embedder) -> None:
    from localkg.indexes.scoring import RelevanceScorer

    encoded: list[str] = []

    class CountingEmbedder:
        """The real model, recording what it is asked to encode."""

        dim = embedder.dim

        def encode(self, texts, batch_size=64, progress=False):
            encoded.extend(texts)
            return embedder.encode(texts, batch_size, progress)

    scorer = RelevanceScorer(CountingEmbedder(), query_cache_size=2)
    first = scorer.score("who directed Top Hat", METAQA_RELATIONS)
    again = scorer.score("who directed Top Hat", METAQA_RELATIONS[::-1])
    np.testing.assert_allclose(first[::-1], again, rtol=1e-6)
    assert sorted(encoded) == sorted(METAQA_RELATIONS + ["who directed Top Hat"])
    scorer.score("q2", ["directed_by"])
    scorer.score("q3", ["directed_by"])
    scorer.score("who directed Top Hat", ["directed_by"])  # evicted from the 2-entry LRU: encoded again
    assert encoded.count("who directed Top Hat") == 2
