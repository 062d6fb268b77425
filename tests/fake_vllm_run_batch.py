"""Plays vLLM's ``run_batch`` for the batch-mode tests: reads an OpenAI batch input file, posts each line's body to a
chat completions endpoint (the scripted server), and writes the batch output file vLLM writes.

    python tests/fake_vllm_run_batch.py -i input.jsonl -o output.jsonl --url http://127.0.0.1:PORT/v1
"""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.request


def post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-i", dest="input", required=True)
    parser.add_argument("-o", dest="output", required=True)
    parser.add_argument("--url", required=True)
    args = parser.parse_args()
    results = []
    with open(args.input, encoding="utf-8") as lines:
        for number, text in enumerate(lines):
            line = json.loads(text)
            status, body = post(args.url, line["body"])
            results.append({"id": f"vllm-{number}", "custom_id": line["custom_id"],
                            "response": {"status_code": status, "request_id": f"vllm-batch-{number}", "body": body}, "error": None})
    with open(args.output, "w", encoding="utf-8") as output:
        output.writelines(json.dumps(result) + "\n" for result in results)


if __name__ == "__main__":
    main()
