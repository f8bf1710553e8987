"""MetaQA's gold relation paths, read off its question types (``actor_to_movie_to_year``):
the dataset names no path, but every question type is a walk through films."""
from __future__ import annotations

from localkg.errors import TrainingDataError
from localkg.store.model import IN, OUT, Hop

#: MetaQA's question-type words → the KB relation that links a film to that kind of thing.
METAQA_RELATIONS = {
    "actor": "starred_actors",
    "director": "directed_by",
    "writer": "written_by",
    "year": "release_year",
    "genre": "has_genre",
    "tag": "has_tags",
    "tags": "has_tags",
    "language": "in_language",
    "imdbrating": "has_imdb_rating",
    "imdbvotes": "has_imdb_votes",
}

def metaqa_relation_path(qtype: str) -> list[Hop]:
    """``actor_to_movie_to_year`` → [(starred_actors, in), (release_year, out)]."""
    kinds = qtype.split("_to_")
    steps = []
    for before, after in zip(kinds, kinds[1:]):
        if after == "movie" and before in METAQA_RELATIONS:
            steps.append((METAQA_RELATIONS[before], IN))
        elif before == "movie" and after in METAQA_RELATIONS:
            steps.append((METAQA_RELATIONS[after], OUT))
        else:
            raise TrainingDataError(f"MetaQA question type {qtype!r} has a step {before}_to_{after} "
                                    "that is not film-centred")
    return steps
