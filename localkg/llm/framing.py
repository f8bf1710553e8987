"""How a prompt becomes the text the model continues: plain completion, or the model's chat template.

Scoring and generation continue the same framed string, so a label's probability and a
generated choice agree. ``completion`` is the text as is (base models such as the bundled
Gemma 3 270M); ``chat`` renders the prompt as one user message with the GGUF's own Jinja
chat template. ``auto`` picks ``chat`` when the GGUF has a template and does not name itself
a base model. Override with ``LLM(prompt_style=...)`` or ``LOCALKG_PROMPT_STYLE``; docs/llm.md
has the details.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from localkg.errors import LLMSettingsError

PROMPT_STYLE_ENV = "LOCALKG_PROMPT_STYLE"
STYLES = ("auto", "completion", "chat")


@dataclass(frozen=True)
class Framing:
    style: str
    template: str = ""
    bos_text: str = ""
    eos_text: str = ""

    def frame(self, prompt: str) -> str:
        if self.style == "completion":
            return prompt
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        formatter = Jinja2ChatFormatter(template=self.template, eos_token=self.eos_text, bos_token=self.bos_text,
                                        add_generation_prompt=True)
        text = formatter(messages=[{"role": "user", "content": prompt}]).prompt
        # The template writes BOS itself; tokenizing adds it again, so drop the written one.
        if self.bos_text and text.startswith(self.bos_text):
            text = text[len(self.bos_text):]
        return text


def choose_framing(metadata: dict[str, str], requested: str | None, bos_text: str, eos_text: str) -> Framing:
    style = (requested or os.environ.get(PROMPT_STYLE_ENV) or "auto").lower()
    if style not in STYLES:
        raise LLMSettingsError(f"prompt style must be one of {', '.join(STYLES)}, not {style!r}")
    template = metadata.get("tokenizer.chat_template", "")
    if style == "auto":
        style = "chat" if template and not _names_base_model(metadata) else "completion"
    if style == "chat" and not template:
        raise LLMSettingsError("prompt style 'chat' needs a GGUF with a chat template (tokenizer.chat_template)")
    return Framing(style=style, template=template, bos_text=bos_text, eos_text=eos_text)


def _names_base_model(metadata: dict[str, str]) -> bool:
    names = " ".join(metadata.get(key, "") for key in ("general.finetune", "general.name"))
    return re.search(r"\bbase\b", names, flags=re.IGNORECASE) is not None
