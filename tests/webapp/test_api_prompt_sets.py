import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from webapp.prompts.models import Prompt, PromptSet

pytestmark = pytest.mark.django_db


def upload(client, name, content, filename):
    return client.post("/api/prompt-sets", {"name": name, "file": SimpleUploadedFile(filename, content)})


def test_it_requires_authentication(client):
    response = client.get("/api/prompt-sets")
    assert response.status_code == 401
    assert "Token" in response.json()["error"]


def test_it_rejects_an_unknown_token(client):
    response = client.get("/api/prompt-sets", HTTP_AUTHORIZATION="Token nope")
    assert response.status_code == 401
    assert response.json()["error"] == "the API token is not valid"


def test_it_rejects_an_unknown_token_even_beside_a_signed_in_session(client, user):
    client.force_login(user)
    assert client.get("/api/prompt-sets").status_code == 200
    response = client.get("/api/prompt-sets", HTTP_AUTHORIZATION="Token nope")
    assert response.status_code == 401 and response.json()["error"] == "the API token is not valid"


def test_it_rejects_the_token_of_a_deactivated_user(api_client, user):
    assert api_client.get("/api/prompt-sets").status_code == 200
    user.is_active = False
    user.save()
    response = api_client.get("/api/prompt-sets")
    assert response.status_code == 401
    assert response.json()["error"] == "the API token is not valid"


def test_it_uploads_the_aime_json_with_labels_and_a_preview(api_client, shared_datasets):
    response = upload(api_client, "AIME 24", (shared_datasets / "aime24.json").read_bytes(), "aime24.json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["row_count"] == 30 and body["has_labels"] is True and body["format"] == "json"
    assert len(body["preview"]) == 5 and body["preview"][0]["prompt"]
    assert Prompt.objects.filter(prompt_set_id=body["id"]).count() == 30


def test_it_uploads_verl_parquet_with_ground_truth_as_labels(api_client, shared_datasets):
    data = (shared_datasets / "aime24_verl.parquet").read_bytes()
    body = upload(api_client, "verl", data, "aime24_verl.parquet").json()
    assert body["row_count"] == 480 and body["has_labels"] is True and body["format"] == "verl_parquet"


def test_a_chat_uploads_system_message_is_stored_and_reaches_the_trainer(api_client, shared_datasets):
    from webapp.prompts.models import PromptSet

    data = (shared_datasets / "aime24_verl.parquet").read_bytes()
    body = upload(api_client, "verl", data, "aime24_verl.parquet").json()
    assert body["preview"][0]["system"] == "Please reason step by step, and put your final answer within \\boxed{}."
    row = next(PromptSet.objects.get(pk=body["id"]).trainer_rows())
    assert row["system"] == body["preview"][0]["system"] and "step by step" not in row["prompt"]
    plain = upload(api_client, "plain", b"What is 2+2?\n", "p.txt").json()
    assert "system" not in next(PromptSet.objects.get(pk=plain["id"]).trainer_rows())


def test_it_uploads_plain_text_without_labels(api_client):
    body = upload(api_client, "plain", b"What is 2+2?\n\nWhat is 3+5?\n", "prompts.txt").json()
    assert body["row_count"] == 2 and body["has_labels"] is False


def test_it_names_the_line_of_invalid_json_and_saves_nothing(api_client):
    lines = [json.dumps({"prompt": f"q{i}", "answer": str(i)}) for i in range(1, 7)] + ['{"prompt": "broken"']
    response = upload(api_client, "bad", "\n".join(lines).encode(), "bad.jsonl")
    assert response.status_code == 400
    assert "line 7" in response.json()["error"]
    assert response.json()["field"] == "file"
    assert PromptSet.objects.count() == 0 and Prompt.objects.count() == 0


def test_it_rejects_duplicate_ids_and_saves_nothing(api_client):
    rows = [{"id": "a", "prompt": "x"}, {"id": "b", "prompt": "y"}, {"id": "a", "prompt": "z"}]
    response = upload(api_client, "dupes", json.dumps(rows).encode(), "dupes.json")
    assert response.status_code == 400
    assert "'a'" in response.json()["error"]
    assert PromptSet.objects.count() == 0


def test_it_rejects_an_empty_file(api_client):
    response = upload(api_client, "empty", b"", "empty.json")
    assert response.status_code == 400 and "empty" in response.json()["error"]


def test_it_rejects_a_file_over_the_size_limit(api_client, settings):
    settings.PROMPT_FILE_MAX_BYTES = 1000
    response = upload(api_client, "big", b"What is 1+1?\n" * 200, "big.txt")
    assert response.status_code == 400 and "limit" in response.json()["error"]
    assert PromptSet.objects.count() == 0


def test_it_asks_for_the_file_field(api_client):
    response = api_client.post("/api/prompt-sets", {"name": "nothing"})
    assert response.status_code == 400 and response.json()["field"] == "file"


def test_it_lists_prompt_sets(api_client):
    upload(api_client, "one", b"a\nb\n", "one.txt")
    body = api_client.get("/api/prompt-sets").json()
    assert [p["name"] for p in body["prompt_sets"]] == ["one"]
