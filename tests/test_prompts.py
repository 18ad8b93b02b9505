"""A prompt's text may not change without its version changing: the version is what the logs record."""
from __future__ import annotations

import hashlib

from code_assistant.model import prompts

# version -> sha256 of the text. When you change a prompt, bump its version and update this table.
KNOWN = {
    "system/v1.3.0": "5decba525a53498de0b3796432b437a3ab38622251289ef3327d8b8fb82c8170",
    "system-blocks/v1.0.0": "db0a64e36359f6c754a3d752df23954a6c177a72c27f1054c8bdd9e6105e2c57",
    "example-blocks-task/v1.0.0": "3bdffe4cba19dcfe5a1abca1320a8549dda0c6bc06e443b9f8cceb775fd2927f",
    "example-blocks-answer/v1.0.0": "9346f4b4ca67faf2fd6cf64a1a7448fcfeb11e6368aad97dbba8eaf29a17f3ad",
    "plan/v1.3.0": "4a90451772a66b03853eb7b5353dfc08584fecdd0178b6e860c01559633b8f04",
    "fix/v1.0.0": "ceead2092d78182514cd013d539db5135c56f4ab002c72c20af89d3f43aca090",
    "ask/v1.0.0": "9a793ebd4e28f6dd05747d5620a4ec66de2364d0e387b5880dfec8b225b09f89",
    "syntax/v1.0.0": "1c3b6d81c951054b2349b5052d7911027d5027e4fffcc61dcb34903d6de8b38f",
    "reask/v1.0.0": "c3acd27678dc16aca030d252b846f330d9bac5b099d0f1fc352ae354d4c9a310",
    "reproduce/v1.0.0": "9f8f4a2fc15aa3483d716ece00f5f709460f05f6b0875e5e20891c375ef7c6d7",
    "reproduce-again/v1.0.0": "956e3e3bf6b82466317e268db97f80798cb8e42bef85e5ffb18e966c7cc30de6",
    "reproduce-unrun/v1.0.0": "43fc0281b933360961fcccaa102fb0cd11dd77c2b33e79a614478b62722cbdfc",
    "reproduced/v1.0.0": "bb0177c5c4df5aa73ba503310d4cfe79d5df705127dfc15b782532cd77ab4a20",
    "read/v1.0.0": "021aa1d55dce0a941de00eac01f2fbc2bd872bdaa0035748f8bbe88b5cf77713",
    "instructions/v1.0.0": "98e8e4b6be9c2931880667a16702b03f63205d5e2d468cccada27b100e08201f",
    "session/v1.0.0": "fa86187e4fa1c1dc5cd196824cf5f7a5e01fa5fc1f2e5d07874048244a24f0ed",
    "unapplied/v1.1.0": "b0d903c26fab48edff4c07670ae919072a99a26871fec80f8b260b121a493ba8",
    "tools-native/v1.0.0": "3f152bf25fb4d511f544776acbb929d013f421c49be80d8c202ecc1d02e45d7c",
    "tools-json/v1.0.0": "7ecb2216cdd5486fecd932e8d0bff5fad0bd55a08e2ff2f05646f588d705f3db",
    "tools-done/v1.0.0": "0f18b4052de1964b92c6598be43f0d0a1f93708380bd87d12caa6aca14d1f0df",
    "first-test/v1.0.0": "1c94d1700560019d98033fad1d09a33bb0d49ae1c389efdb0b673d61994cdaa9",
    "plan-next/v1.0.0": "ebf4ca9f5192dbd1fc98161c63aab65614871bd89055ebc641ee47260a5a2543",
}


def test_every_prompt_text_matches_its_version() -> None:
    for prompt in prompts.ALL.values():
        digest = hashlib.sha256(prompt.text.encode()).hexdigest()
        assert prompt.version in KNOWN, f"new prompt version {prompt.version}: add it to KNOWN with {digest}"
        assert KNOWN[prompt.version] == digest, f"{prompt.version} changed without a version bump"


def test_prompts_render_with_their_fields() -> None:
    text = prompts.PLAN.render(task="T", test_command="pytest", baseline="1 failed", baseline_failures="",
                               context="ctx", excerpts="")
    assert "T" in text and "ctx" in text and "(excerpt)" not in text
    assert "Files marked (excerpt)" in prompts.PLAN.render(task="T", test_command="pytest", baseline="",
                                                           baseline_failures="", context="ctx",
                                                           excerpts=prompts.excerpts_said(["full", "excerpt"]))
