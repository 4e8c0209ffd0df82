import json

import pytest

from dataset_kit.formats.shards.manifest import Manifest
from dataset_kit.shards import ManifestError
from tests.shards.conftest import write


def test_a_malformed_manifest_names_the_file_and_field(tmp_path):
    manifest = write(tmp_path / "set", n=10)
    data = json.loads(manifest.to_json())
    data["shards"][0]["name"] = "../escape"
    with pytest.raises(ManifestError, match=r"m\.json, shards\[0\]: 'name' must be a plain"):
        Manifest.from_json(json.dumps(data), "m.json")
    data = json.loads(manifest.to_json())
    data["samples"] += 1
    with pytest.raises(ManifestError, match="'samples' is 11, but its shards hold 10"):
        Manifest.from_json(json.dumps(data), "m.json")
    with pytest.raises(ManifestError, match="m.json is not JSON"):
        Manifest.from_json("{", "m.json")
    with pytest.raises(ManifestError, match="not a dataset_kit shards manifest"):
        Manifest.from_json("{}", "m.json")
