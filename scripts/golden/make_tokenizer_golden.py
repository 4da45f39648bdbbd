#!/usr/bin/env python3
"""Writes the tokenizer golden files that tests/tokenizer/ compares rtgen against.

Run once with the golden venv (not a product dependency); the output is checked in:
  /opt/rtgen-golden-venv/bin/python scripts/golden/make_tokenizer_golden.py

Outputs (under tests/golden/data/):
  tokenization.jsonl  one JSON object per string: text, ids (special tokens parsed), ids_plain
                      (special tokens as text), decoded, llama3_pieces (Llama 3 regex split),
                      ids_llama3 (the same vocabulary behind Llama 3's pre-tokenizer pipeline:
                      Split(regex) + ByteLevel(use_regex=false), ignore_merges=true)
  chat_template.jsonl one rendering per line: format, template, bos, messages, rendered
  smollm2/tokenizer.json, smollm2/tokenizer_config.json

Reference tokenizer. transformers' GGUF converter builds SmolLM2's tokenizer with a plain
ByteLevel pre-tokenizer, but the model was trained with (and its published tokenizer.json,
like llama.cpp's "smollm" pre-type, uses) Digits(individual_digits=True) before ByteLevel.
The reference here is that published pipeline: the converted tokenizer.json with its
pre_tokenizer replaced by Sequence[Digits(individual), ByteLevel]. The script prints how many
strings the unpatched converter would tokenize differently.
"""

import json
import os
import random
import sys

from tokenizers import Regex, Tokenizer, pre_tokenizers
from transformers import AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GGUF_DIR = os.path.join(ROOT, "models")
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
OUT_DIR = os.path.join(ROOT, "tests", "golden", "data")

# Llama 3's pre-tokenizer split pattern (the format is public; written out here as a regex).
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

LLAMA3_PRE_TOKENIZER = {
    "type": "Sequence",
    "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": LLAMA3_PATTERN}, "behavior": "Isolated",
         "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
    ],
}

HANDWRITTEN = [
    "", " ", "  ", "\n", "\t", "\r\n", " \n ", "a", "Hello", "Hello world", " Hello world",
    "Hello, world! How are you?", "The quick brown fox jumps over the lazy dog.",
    "I'm here, you're there, they've gone, we'll see, he'd know, it's fine, don't.",
    "I'M HERE, YOU'RE THERE, THEY'VE GONE, WE'LL SEE, HE'D KNOW, IT'S FINE, DON'T.",
    "'s 't 're 've 'm 'll 'd 'S 'T 'Re 'VE", "rock'n'roll", "''''", "' s",
    "1", "12", "123", "1234", "12345", "3.14159265358979", "1,000,000", "0x7fffffff",
    "2024-05-17T12:34:56Z", "+44 20 7946 0958", "x²+y² = z²", "½ ¼ ¾ Ⅻ ⅷ", "٣٤٥ ١٢",
    "  1", "a  12b", "a\t\t3", "99 bottles", "phone: 5551234567890123",
    "café naïve résumé Zürich Ångström façade", "ÀÉÎÕÜ àéîõü ñ Ñ ß ẞ",
    "Ελληνικά γράμματα και αριθμοί", "Русский текст, съешь же ещё этих мягких французских булок",
    "日本語のテキストです。", "中文文本，包含标点符号。", "한국어 텍스트입니다", "ภาษาไทย",
    "العربية نص تجريبي", "עברית טקסט", "हिन्दी पाठ का उदाहरण", "Tiếng Việt có dấu",
    "emoji 😀😃😄 end", "👍🏽", "👨‍👩‍👧‍👦 family", "🏳️‍🌈", "🇫🇷🇯🇵🇺🇸", "❤️ ✨ ☃ ♥",
    "mixed: English, Ελληνικά, Русский, 日本語, 한국어, العربية!",
    "def f(x):\n    return x * 2\n", "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "if x != None and y >= 3:\n\tprint(f\"{x=}\")", "<div class=\"a\">Hi &amp; bye</div>",
    "SELECT * FROM users WHERE id = 42;", "#include <stdio.h>\nint main(void) { return 0; }",
    "   leading spaces", "trailing spaces   ", "multiple     internal     spaces",
    "tabs\tand\tnewlines\nmixed\r\nCRLF\rCR", "\n\n\nthree newlines", "a\n\n", " \t \n \r ",
    "\u00a0non-breaking\u00a0space", "zero\u200bwidth", "em\u2003space", "ideographic\u3000space",
    "<|im_start|>user\nhi<|im_end|>", "<|im_start|>system\nYou are helpful.<|im_end|>\n",
    "<|endoftext|>", "text<|endoftext|>more", "<|im_start|><|im_end|>", "<|im_start",
    "<|im_end|><|im_end|> <|im_start|>", "a<repo_name>b<filename>c", "<|IM_START|>",
    "!!!???...", "---===+++", "«quotes» “curly” ‘single’ „low“", "…—–", "$100 €50 £20 ¥1000",
    "email@example.com https://example.com/path?q=1&r=2#frag", "C:\\Windows\\System32",
    "ALLCAPS lowercase MiXeD CamelCaseWord snake_case_word kebab-case-word",
    "supercalifragilisticexpialidocious", "ctrl\x04\x06chars\x1d\x13end", "a\x04b", "antidisestablishmentarianism", "ﬁ ﬂ ﬀ",
]

FRAGMENTS = [
    "hello", "world", " the", "The", " cat", "don't", "it's", "WE'LL", " 42", "7", "3.5",
    "123456789", " 0", "é", "naïve", "Straße", "Ωmega", "ключ", "東京", "서울", "مرحبا", "שלום",
    "नमस्ते", "😀", "👩‍💻", "🇩🇪", "🏳️‍🌈", "\n", "\t", "  ", "\r\n", " ", "\n\n", "   \n",
    "(", ")", "{", "}", ";", ":", "::", "->", "=>", "!=", "==", "'", "\"", "`", "...", ",", ".",
    "?", "!", "-", "_", "#", "@", "%", "&", "*", "/", "\\", "<", ">", "<|im_start|>",
    "<|im_end|>", "<|endoftext|>", "x", "Q", "ß", "İ", "ı", "ǅ", "²", "½", "٣",
]


def make_strings():
    rng = random.Random(20240517)
    strings = list(HANDWRITTEN)
    while len(strings) < 340:
        n = rng.randint(1, 9)
        s = "".join(rng.choice(FRAGMENTS) for _ in range(n))
        if rng.random() < 0.3:
            s = " " + s
        if s not in strings:
            strings.append(s)
    return strings


def reference_tokenizer(tmp_dir):
    hf = AutoTokenizer.from_pretrained(GGUF_DIR, gguf_file=GGUF_NAME)
    hf.save_pretrained(tmp_dir)
    with open(os.path.join(tmp_dir, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    converted = Tokenizer.from_str(json.dumps(tj))
    tj["pre_tokenizer"] = {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": True},
        ],
    }
    return hf, converted, tj


def chat_cases(hf):
    convs = [
        [{"role": "user", "content": "Hi!"}],
        [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "2+2?"}],
        [{"role": "user", "content": "Tell me a joke."},
         {"role": "assistant", "content": "Why did the chicken cross the road?"},
         {"role": "user", "content": "Why?"}],
        [{"role": "system", "content": "  padded system  "},
         {"role": "user", "content": "\n multi\nline  \n"},
         {"role": "assistant", "content": " ok "}, {"role": "user", "content": "日本語 😀"}],
        [{"role": "user", "content": ""}],
    ]
    # Llama 3 and Llama 2 formats, written here as Jinja from the published prompt formats.
    llama3 = (
        "{% for message in messages %}{% set content = '<|start_header_id|>' + message['role']"
        " + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' %}"
        "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
        "{{ content }}{% endfor %}{% if add_generation_prompt %}"
        "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
    )
    llama2 = (
        "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
        "{% set system_message = messages[0]['content'] %}{% else %}"
        "{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
        "{% for message in loop_messages %}"
        "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
        "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
        "{% endif %}{% if loop.index0 == 0 and system_message != false %}"
        "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
        "{% else %}{% set content = message['content'] %}{% endif %}"
        "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
        "{% elif message['role'] == 'assistant' %}{{ ' ' + content.strip() + ' ' + eos_token }}"
        "{% endif %}{% endfor %}"
    )
    out = []
    templates = [("chatml", hf.chat_template, "<|im_start|>", "<|im_end|>"),
                 ("llama3", llama3, "<|begin_of_text|>", "<|eot_id|>"),
                 ("llama2", llama2, "<s>", "</s>")]
    for fmt, template, bos, eos in templates:
        for conv in convs:
            for gen in (True, False):
                try:
                    text = hf.apply_chat_template(conv, chat_template=template, tokenize=False,
                                                  add_generation_prompt=gen, bos_token=bos,
                                                  eos_token=eos)
                except Exception:  # the Llama 2 format rejects non-alternating roles
                    continue
                out.append({"format": fmt, "template": template, "bos": bos,
                            "add_generation_prompt": gen, "messages": conv, "rendered": text})
    return out


def main():
    tmp_dir = os.path.join(ROOT, ".cache", "tokenizer_golden")
    os.makedirs(tmp_dir, exist_ok=True)
    hf, converted, tj = reference_tokenizer(tmp_dir)
    ref = Tokenizer.from_str(json.dumps(tj))
    tj3 = json.loads(json.dumps(tj))
    tj3["pre_tokenizer"] = LLAMA3_PRE_TOKENIZER
    tj3["model"]["ignore_merges"] = True
    ref_llama3 = Tokenizer.from_str(json.dumps(tj3))
    llama3_split = pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated")

    out_tok = os.path.join(OUT_DIR, "smollm2")
    os.makedirs(out_tok, exist_ok=True)
    with open(os.path.join(out_tok, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)
    with open(os.path.join(out_tok, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "add_bos_token": False,
                   "chat_template": hf.chat_template}, f, ensure_ascii=False, indent=1)

    strings = make_strings()
    differ = 0
    with open(os.path.join(OUT_DIR, "tokenization.jsonl"), "w", encoding="utf-8") as f:
        for s in strings:
            ids = ref.encode(s, add_special_tokens=False).ids
            ref.encode_special_tokens = True
            ids_plain = ref.encode(s, add_special_tokens=False).ids
            ref.encode_special_tokens = False
            if converted.encode(s, add_special_tokens=False).ids != ids:
                differ += 1
            decoded = ref.decode(ids, skip_special_tokens=False)
            pieces = [p for p, _ in llama3_split.pre_tokenize_str(s)]
            f.write(json.dumps({"text": s, "ids": ids, "ids_plain": ids_plain,
                                "decoded": decoded, "llama3_pieces": pieces,
                                "ids_llama3": ref_llama3.encode(s, add_special_tokens=False).ids},
                               ensure_ascii=False) + "\n")
    cases = chat_cases(hf)
    with open(os.path.join(OUT_DIR, "chat_template.jsonl"), "w", encoding="utf-8") as f:
        for c in cases:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    print(f"{len(strings)} strings ({differ} tokenized differently by the unpatched converter), "
          f"{len(cases)} chat renderings", file=sys.stderr)


if __name__ == "__main__":
    main()
