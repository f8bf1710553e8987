"""The 64-bit key hash of the load's hash sets (``keyset.hash_keys``): one value per key whatever
form the keys come in, and a store whose sets another function hashed (an older localkg's
BLAKE2b-64) has them rebuilt by its next writer, so an append into it stays exact (real Kùzu)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from click.testing import CliRunner

from localkg.cli import main
from localkg.store import KG, schema
from localkg.store.dedupe import KEYSETS
from localkg.store.keyset import HASH_FUNCTION, KeySet, hash_keys

KEYS = ["", "a", "a\x00", "b", "m.0abc", "m.0abd", "x" * 8, "x" * 9, "x" * 16, "ü" * 40,
        "http://rdf.freebase.com/ns/people.person.place_of_birth"]


def test_a_key_hashes_the_same_from_python_and_from_arrow_in_any_layout() -> None:
    expected = hash_keys(KEYS)
    assert expected.dtype == np.uint64 and len(set(expected.tolist())) == len(KEYS)
    array = pa.array(KEYS)
    assert hash_keys(array).tolist() == expected.tolist()
    assert hash_keys(array.cast(pa.large_string())).tolist() == expected.tolist()
    assert hash_keys(array.cast(pa.binary())).tolist() == expected.tolist()
    assert hash_keys(array.slice(3, 5)).tolist() == expected[3:8].tolist()   # an offset into shared buffers
    chunked = pa.chunked_array([array.slice(0, 4), array.slice(4)])
    assert hash_keys(chunked).tolist() == expected.tolist()
    assert hash_keys([]).tolist() == hash_keys(pa.array([], pa.string())).tolist() == []


def test_the_hash_is_pinned_to_its_name() -> None:
    """Stored sets hold these values: a change to the function must come with a new HASH_FUNCTION
    (and a label table format), or appends into existing stores would miss their duplicates."""
    assert HASH_FUNCTION == "fold64-v1"
    assert hash_keys(["", "m.0abc", "x" * 9]).tolist() == [16294208416658607535, 15988551663353879761,
                                                           17346759988669223251]


def test_keys_differing_in_one_byte_anywhere_do_not_collide() -> None:
    base = "http://www.wikidata.org/entity/Q" + "7" * 40
    variants = [base] + [base[:i] + chr(ord(base[i]) ^ 1) + base[i + 1:] for i in range(len(base))]
    variants += [base + "\x00", base[:-1]]
    assert len(set(hash_keys(variants).tolist())) == len(variants)
    assert len(np.unique(hash_keys(pa.array([f"m.{i:x}" for i in range(200_000)])))) == 200_000


def test_a_lone_surrogate_hashes_and_a_null_is_refused() -> None:
    assert len(hash_keys(["\ud800", "\ud801"])) == 2
    with pytest.raises(ValueError, match="null"):
        hash_keys(pa.array(["a", None]))


def test_a_new_set_names_its_hash_function(tmp_path: Path) -> None:
    keys = KeySet(tmp_path / "set")
    assert keys.hashed_by == HASH_FUNCTION
    (tmp_path / "set" / "hash").unlink()
    assert KeySet(tmp_path / "set").hashed_by == HASH_FUNCTION   # still empty: nothing hashed otherwise


def _rehash_as_an_older_localkg(db: Path) -> None:
    """Replace every hash set's keys by other 64-bit values, as another function gives, keeping
    their count and values, and drop the file naming the function (sets from before it)."""
    for name in KEYSETS:
        directory = db / schema.KEYS_DIR / name
        for run in directory.glob("run-*[0-9].npy"):
            other = np.load(run) ^ np.uint64(0x5DEECE66D)
            order = np.argsort(other, kind="stable")
            np.save(run, other[order])
            values = run.with_suffix(".values.npy")
            if values.exists():
                np.save(values, np.load(values)[order])
        (directory / "hash").unlink()


def _facts(db: Path) -> int:
    with KG.open(db, read_only=True) as kg:
        return kg.rows("MATCH ()-[f:Fact]->() RETURN count(f)")[0][0]


def test_an_append_into_a_store_hashed_by_another_function_stays_exact(tmp_path: Path) -> None:
    lines = [f"film{i}\tdirected_by\tperson{i % 7}" for i in range(300)]
    first = tmp_path / "first.tsv"
    first.write_text("\n".join(lines) + "\n")
    db = tmp_path / "db"
    runner = CliRunner()
    assert runner.invoke(main, ["load", "triples", str(first), "--db", str(db)]).exit_code == 0
    assert _facts(db) == 300
    _rehash_as_an_older_localkg(db)
    check = runner.invoke(main, ["check", "--db", str(db)])
    assert check.exit_code != 0 and "hashed by an earlier localkg" in check.output
    again = tmp_path / "again.tsv"
    again.write_text("\n".join(lines + ["film300\tdirected_by\tperson0"]) + "\n")
    result = runner.invoke(main, ["load", "triples", str(again), "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "earlier localkg whose key hashes differ" in result.stderr
    assert _facts(db) == 301   # the 300 already stored were found in the rebuilt sets
    for name in KEYSETS:
        assert KeySet(db / schema.KEYS_DIR / name).hashed_by == HASH_FUNCTION
    nodes = KeySet(db / schema.KEYS_DIR / "nodes", with_values=True)
    assert (nodes.lookup(hash_keys(["film0", "film300", "person6"])) >= 0).all()
    quiet = runner.invoke(main, ["load", "triples", str(again), "--db", str(db)])
    assert quiet.exit_code == 0 and "earlier localkg" not in quiet.stderr and _facts(db) == 301


def test_a_label_table_hashed_by_an_older_localkg_is_not_read_and_is_written_again(tmp_path: Path) -> None:
    from localkg.indexes.label_table import META_FILE, LabelTable, build_label_table, table_directory

    with KG.create(tmp_path / "db") as kg:
        kg.add_triples([("Top Hat", "directed_by", "Mark Sandrich")])
        assert build_label_table(kg)
        meta = table_directory(kg) / META_FILE
        meta.write_text(meta.read_text().replace('"format": 4', '"format": 3'))
        assert LabelTable.load(table_directory(kg)) is None   # its hashes are BLAKE2b-64's
        assert build_label_table(kg) and LabelTable.load(table_directory(kg)) is not None
        assert LabelTable.load(table_directory(kg)).nodes_named(["top hat"])
