"""What the path scorer reads: the masked question and each path's hops as tensors.

The encoder is frozen, so every question is embedded once, every relation
label once and every question word once (``RelationVectors`` keeps them);
training epochs and the reasoner's questions then only run the small scorer.

Beside the hops, each path gets its word match: how its labels' words and the
question's content words meet, with no training. Part of it is the share of
the labels' words the question says; the rest is a coverage of the question by
the hops, word by word: every hop must be what a question word of its own
means, and every question word must be meant by some hop (a word that says a
label's stem, by a hop of its own: a stem said twice asks for two hops). A word means a hop
as much as the encoder says, and at least as much as a label's own word would
where it says the label's stem ("director", "screenwriter" say "written by"'s
"writ"): the encoder's vectors of single words are noisy, and a stem the
question says is firmer evidence than their cosine. The coverage is what tells "who
directed the films X acted in" (two hops, directed and acted) from "who
directed X" (one), where the whole question's vector sits near both paths.
And a path is said from the topic outwards: in "the actors of the films
directed by the director of X" the word nearest the topic names the first hop,
so of two paths with the same relations in another order, the one whose
relations' words stand ever farther from the topic's name gets a little more.
A relation walked there and back ("the films that share X's director") says
its label once, so its words alone cannot tell it from the one hop ("X's
director"). Where the label match ranks alone (a question unlike the training
questions), such a path is covered by its labels with or without the words the
store's own questions say the sharing with; the learned part, which has seen
those questions, is fitted beside the plain word match.
"""
from __future__ import annotations

import functools
import re
from typing import Any, Iterable, Sequence

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from localkg.indexes.stems import content_stems, content_words, stem

from localkg.path_scorer.walk import RelationPath
from localkg.store.kg import KG
from localkg.store.model import IN
from localkg.text import readable_relation, without_mentions


def question_text(question: str, topic_names: Iterable[str]) -> str:
    """The question as the scorer sees it: without the topics' names, which every path shares."""
    return without_mentions(question, topic_names)


_MENTION = "qqtopicmentionqq"  # a content word no question says, standing where a topic's name stood


def mention_distances(question: str, topic_names: Iterable[str]) -> np.ndarray | None:
    """How many content words each content word of :func:`question_text` stands from the topic's
    mention (None: no topic name is said, or several topics are, whose words between them
    belong to different legs)."""
    names = {name for name in topic_names if name}
    if len(names) != 1:
        return None
    marked = re.sub(re.escape(next(iter(names))), f" {_MENTION} ", question, flags=re.I)
    words = content_words(marked)
    # a possessive's "s" ("X's wife") is not a word between the topic and the next one
    places = np.cumsum([word != "s" for word in words])
    mentions = [places[index] for index, word in enumerate(words) if word == _MENTION]
    kept = [places[index] for index, word in enumerate(words) if word != _MENTION]
    if not mentions or len(kept) != len(content_words(question_text(question, names))):
        return None  # no name said, or nothing but the name (question_text keeps it then)
    return np.array([min(abs(place - m) for m in mentions) for place in kept], dtype=np.float32)


#: Weights of the word match's parts, against the cosine of the whole question to the path (whose
#: range is the coverage's): the share said is embed-path's lexical weight.
SAID_WEIGHT = 0.2
COVERAGE_WEIGHT = 2.0
ORDER_WEIGHT = 0.1
#: What a relation walked there and back means besides its label: the words the store's own
#: questions say it with (``synthetic._SHARED``: "the others with the same director as X", "the
#: things that share X's director").
SHARING = "the others that share the same"


#: How much a question word means a hop whose label's stem it says, at least: about the cosine the
#: encoder gives a label's own word to the label ("directed" to "directed by" 0.84, "tags" to "has
#: tags" 0.78).
SAID_SIMILARITY = 0.8
#: A label's stem this long is said by a word that contains it ("screenwriter", "writ"); a shorter
#: one only by a word with the same stem ("act" is in "character").
COMPOUND_STEM = 4


def question_stems(question: str) -> tuple[str, ...]:
    """The stems of the question's content words, in order: the rows of
    :meth:`RelationVectors.word_vectors`."""
    return tuple(stem(word) for word in content_words(question))


def _says(word_stem: str, label_stem: str) -> bool:
    """Whether a question word (its stem) says a label's word (its stem)."""
    return word_stem == label_stem or (len(label_stem) >= COMPOUND_STEM and label_stem in word_stem)


def _share(stems: frozenset[str], word_stems: Sequence[str]) -> float:
    """The share of ``stems`` (a label's words) that the question's words say."""
    return len(_said(tuple(word_stems), stems)) / len(stems) if stems else 0.0


@functools.lru_cache(maxsize=1 << 16)
def _said(word_stems: tuple[str, ...], label_stems: frozenset[str]) -> frozenset[str]:
    """The label's words (stems) that some question word says: asked for every hop of every
    candidate path, with few distinct questions and labels among them."""
    return frozenset(s for s in label_stems if any(_says(word, s) for word in word_stems))


def _assigned(similarity: np.ndarray) -> float:
    """The mean similarity of the hops (columns) to the question words (rows) when each hop takes a
    word of its own, the best such assignment; a hop left without a word counts 0."""
    if similarity.shape[1] == 1:
        return float(similarity.max())
    rows, columns = linear_sum_assignment(similarity, maximize=True)
    return float(similarity[rows, columns].sum() / similarity.shape[1])


@functools.lru_cache(maxsize=1 << 16)
def _saying(word_stems: tuple[str, ...], label_stems: frozenset[str]) -> tuple[bool, ...]:
    """For each question word, whether it says one of a label's words."""
    return tuple(any(_says(word, s) for s in label_stems) for word in word_stems)


def _unit(vector: np.ndarray) -> np.ndarray:
    return vector / max(float(np.linalg.norm(vector)), 1e-12)


class RelationVectors:
    """The frozen encoder's vector of each relation's readable label, computed on first use."""

    def __init__(self, kg: KG, embedder: Any):
        self.embedder = embedder
        self._labels = {relation: label for relation, label, _description, _facts in kg.relation_catalogue()}
        self._index: dict[str, int] = {}
        self._stems: dict[str, frozenset[str]] = {}
        self._vectors: list[np.ndarray] = []
        self._units: list[np.ndarray] = []
        self._words: dict[str, np.ndarray] = {}
        self._matrix: torch.Tensor | None = None

    def indices(self, relations: Iterable[str]) -> list[int]:
        """Rows of :attr:`matrix` for ``relations`` (labels not seen before are embedded now)."""
        relations = list(relations)
        missing = list(dict.fromkeys(r for r in relations if r not in self._index))
        if missing:
            texts = [readable_relation(self._labels.get(r, r)) for r in missing]
            for relation, text, vector in zip(missing, texts, self.embedder.encode(texts)):
                self._stems[relation] = content_stems(text)
                self._index[relation] = len(self._vectors)
                self._vectors.append(vector)
                self._units.append(_unit(vector))
            self._matrix = None
        return [self._index[r] for r in relations]

    def embed_words(self, questions: Iterable[str]) -> None:
        """Embed the content words of ``questions`` not embedded yet, in one batch (training
        calls it once for all its questions; the reasoner lets :meth:`word_vectors` do it)."""
        self._embed([w for q in questions for w in content_words(q)])

    def _embed(self, words: Iterable[str]) -> None:
        missing = list(dict.fromkeys(w for w in words if w not in self._words))
        if missing:
            for word, vector in zip(missing, self.embedder.encode(missing)):
                self._words[word] = _unit(vector)

    def word_vectors(self, question: str) -> np.ndarray | None:
        """The unit vectors of the question's content words, one row each (None: it has none)."""
        words = content_words(question)
        if not words:
            return None
        self._embed(words)
        return np.stack([self._words[w] for w in words])

    def said(self, relation: str, word_stems: Sequence[str]) -> float:
        """The share of ``relation``'s label words (stems) that the question's words say."""
        return _share(self._stems[relation], word_stems)

    def word_match(self, path: RelationPath, words: np.ndarray | None, word_stems: Sequence[str],
                   distances: np.ndarray | None = None, sharing: bool = False, leg: bool = False) -> float:
        """``path``'s word match to the question, given its :meth:`word_vectors` and their stems
        (:func:`question_stems`), how far each word stands from the topic
        (:func:`mention_distances`), and with ``sharing`` a relation walked back covered with or
        without :data:`SHARING` (see the module docstring); ``leg``: one of several topics' paths
        (:func:`_coverage`)."""
        said = _share(frozenset().union(*(self._stems[relation] for relation, _direction in path)), word_stems)
        if words is None:
            return SAID_WEIGHT * said
        if len(word_stems) != len(words):
            raise ValueError("word_stems must be the stems of the words word_vectors embedded (question_stems)")
        relations, similarity, floored = self._similarities(path, words, word_stems)
        hops = [sum(relation == r for r, _direction in path) for relation in relations]
        slots = _label_slots(tuple(word_stems), tuple((self._stems[r], n) for r, n in zip(relations, hops)))
        covered = _coverage(similarity, floored, slots, leg)
        if sharing and _walks_back(path):  # the sharing said or not ("the films that share X's director", "X's director's films")
            shared = words @ self._sharing()
            covered = max(covered, _coverage(np.column_stack([similarity, shared]),
                                             np.column_stack([floored, shared]), slots, leg))
        return SAID_WEIGHT * said + COVERAGE_WEIGHT * covered + ORDER_WEIGHT * _order(path, relations, floored, distances)

    def _sharing(self) -> np.ndarray:
        self._embed([SHARING])
        return self._words[SHARING]

    def order(self, path: RelationPath, words: np.ndarray | None, word_stems: Sequence[str],
              distances: np.ndarray | None) -> float:
        """Whether the path's hops are said from the topic outwards (:func:`_order`), given the
        question's :meth:`word_vectors`, their stems and :func:`mention_distances`."""
        if words is None or distances is None:
            return 0.0
        relations, _similarity, floored = self._similarities(path, words, word_stems)
        return _order(path, relations, floored, distances)

    def _similarities(self, path: RelationPath, words: np.ndarray,
                      word_stems: Sequence[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
        """The path's relations (each once) and the words × relations similarity, as the encoder
        says it and floored at :data:`SAID_SIMILARITY` where a word says the label's stem."""
        relations = list(dict.fromkeys(relation for relation, _direction in path))
        similarity = words @ np.stack([self._units[self._index[relation]] for relation in relations]).T
        says = np.array([_saying(tuple(word_stems), self._stems[relation]) for relation in relations],
                        dtype=np.float32).reshape(len(relations), len(word_stems)).T
        return relations, similarity, np.maximum(similarity, SAID_SIMILARITY * says)

    @property
    def matrix(self) -> torch.Tensor:
        if self._matrix is None:
            self._matrix = torch.from_numpy(np.stack(self._vectors)) if self._vectors else torch.zeros(0)
        return self._matrix


def _walks_back(path: RelationPath) -> bool:
    """Whether some hop of ``path`` walks the relation of the hop before it back."""
    return any(relation == before and direction != direction_before
               for (before, direction_before), (relation, direction) in zip(path, path[1:]))


def _coverage(similarity: np.ndarray, floored: np.ndarray, slots: "LabelSlots", leg: bool) -> float:
    """How well the hops (columns) and the question's content words (rows) cover each other: the
    lower of the mean similarity of each hop to a word of its own (:func:`_assigned`, on the
    ``floored`` similarity) and the mean similarity of each word to a hop. A word that says a
    label's stem needs a hop of its own for that (``slots``): without one it counts only its best
    similarity to a relation whose label it does not say. For a ``leg``, one topic's path of a
    question with several, only the first: its hops must be said, but the words they do not say
    may belong to the other legs."""
    if leg:  # the other topics' legs say the rest of the question
        return _assigned(floored)
    says, columns = slots
    saying = says.any(axis=1)
    said_columns = np.zeros(floored.shape, dtype=bool)
    if columns:
        np.logical_or.at(said_columns.T, list(columns), says.T.astype(bool))
    other = np.where(said_columns, -np.inf, similarity).max(axis=1)
    words = np.where(saying, np.maximum(other, 0.0), similarity.max(axis=1))
    if saying.any():
        gain = says * np.maximum(floored[:, list(columns)] - words[:, None], 0.0)
        rows, chosen = linear_sum_assignment(gain, maximize=True)
        words[rows] += gain[rows, chosen]
    return float(min(_assigned(floored), words.mean()))


#: Which question words say which label stem of a path, one column per stem and hop that walks
#: its relation (words × slots), and each slot's relation (a column of the similarity).
LabelSlots = tuple[np.ndarray, tuple[int, ...]]


@functools.lru_cache(maxsize=1 << 16)
def _label_slots(word_stems: tuple[str, ...], labels: tuple[tuple[frozenset[str], int], ...]) -> LabelSlots:
    """The :data:`LabelSlots` of a path whose relations have these label stems and are walked so
    many times: a label stem of a relation walked n times can be said by n words. "the director
    of X also directed which films" says "direct" twice, so the one hop ``directed_by`` leaves a
    word unexplained and the walk there and back explains both; "released in which years" says
    two stems of one label, each once."""
    slots = [(column, label_stem) for column, (stems, hops) in enumerate(labels)
             for label_stem in sorted(stems) for _hop in range(hops)]
    says = np.array([[_says(word, label_stem) for _column, label_stem in slots] for word in word_stems],
                    dtype=np.float32).reshape(len(word_stems), len(slots))
    return says, tuple(column for column, _stem in slots)


def _order(path: RelationPath, relations: Sequence[str], floored: np.ndarray, distances: np.ndarray | None) -> float:
    """Whether the path's hops are said from the topic outwards: for each step to a new relation,
    +1 if the word the next relation means most (``floored``: words × ``relations``) stands
    farther from the topic than the one the relation before it means, -1 if nearer (0 for a
    one-relation path or a question whose topic mention is unknown)."""
    if distances is None:
        return 0.0
    columns = [relations.index(relation) for index, (relation, _direction) in enumerate(path)
               if index == 0 or relation != path[index - 1][0]]
    if len(columns) < 2:
        return 0.0
    nearest = distances[floored[:, columns].argmax(axis=0)]
    return float(np.sign(np.diff(nearest)).mean())


PathTensors = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def path_tensors(paths: Sequence[RelationPath], question: str, vectors: RelationVectors,
                 types: dict[RelationPath, int], hops: int | None = None,
                 distances: np.ndarray | None = None, sharing: bool = False, leg: bool = False) -> PathTensors:
    """(relation index, walked backwards, share of the label the question says, hop exists)
    tensors of shape (len(paths), hops), each path's word match to the question, and each
    path's row in ``types`` (0: not in it); ``leg``: the paths are one topic's of a question with
    several."""
    width = hops or max((len(p) for p in paths), default=1)
    relations = torch.zeros((len(paths), width), dtype=torch.long)
    backward = torch.zeros((len(paths), width), dtype=torch.bool)
    said = torch.zeros((len(paths), width), dtype=torch.float32)
    mask = torch.zeros((len(paths), width), dtype=torch.bool)
    words = torch.zeros(len(paths), dtype=torch.float32)
    rows = vectors.indices(relation for path in paths for relation, _direction in path)
    stems = question_stems(question)
    question_words = vectors.word_vectors(question)
    position = 0
    for row, path in enumerate(paths):
        for column, (relation, direction) in enumerate(path):
            relations[row, column] = rows[position]
            backward[row, column] = direction == IN
            said[row, column] = vectors.said(relation, stems)
            mask[row, column] = True
            position += 1
        words[row] = vectors.word_match(path, question_words, stems, distances, sharing, leg)
    return relations, backward, said, mask, words, torch.tensor([types.get(path, 0) for path in paths], dtype=torch.long)
