"""Numbers of technical writing read as a careful narrator reads them: model and part numbers as
names, never as quantities and never run into the next number; ranges, lists, multiples and arrows
written without spaces; counts with a scale letter; signed figures. English and Chinese."""

from __future__ import annotations

import pytest

from pipeline.text import normalize_text


@pytest.mark.parametrize(
    "text,expected",
    [
        ("显卡是GTX 1650 4GB。", "显卡是GTX 一六五零，四吉字节。"),
        ("我们用A100训练。", "我们用A一零零训练。"),
        ("A10 24 GB够用。", "A一零，二十四吉字节够用。"),
        ("RTX 3080和3090都很快。", "RTX 三零八零和三零九零都很快。"),
        ("RTX 3080/3090都很快。", "RTX 三零八零，三零九零都很快。"),
        ("The GTX 1650 4GB card.", "The GTX sixteen fifty, four gigabytes card."),
        ("The RTX 3080 and 3090 are fast.", "The RTX thirty eighty and thirty ninety are fast."),
        ("An A100 80GB is fast.", "An A one hundred, eighty gigabytes is fast."),
        ("The RTX3080 and GTX1650 cards.", "The RTX thirty eighty and GTX sixteen fifty cards."),
        ("显卡RTX3080很快。", "显卡RTX三零八零很快。"),
    ],
)
def test_model_numbers_are_names_never_quantities_nor_glued_to_the_next_number(text: str, expected: str):
    assert normalize_text(text) == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("范围是64-128。", "范围是六十四至一百二十八。"),
        ("分组(0-64, 65-128, 129-256)。", "分组，零至六十四，六十五至一百二十八，一百二十九至二百五十六。"),
        ("提升40-75% 1.3-1.8×。", "提升百分之四十至百分之七十五，一点三至一点八倍。"),
        ("Ranges 64-128 and 0-64.", "Ranges sixty four to one hundred twenty eight and zero to sixty four."),
        ("Use 1.3-1.8× less.", "Use one point three to one point eight times less."),
        ("设置buckets=[64,128,256,512]即可。", "设置buckets等于，六十四、一百二十八、二百五十六、五百一十二，即可。"),
        ("sizes=[64,128,256]", "sizes equals, sixty four, one hundred twenty eight, two hundred fifty six"),
        ("Qwen2.5-7B模型", "Qwen二点五，七B模型"),
    ],
)
def test_ranges_lists_and_multiples_written_without_spaces(text: str, expected: str):
    assert normalize_text(text) == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("显存从8.9 GB → 6.5 GB。", "显存从八点九吉字节到六点五吉字节。"),
        ("Memory 8.9 GB → 6.5 GB.", "Memory eight point nine gigabytes to six point five gigabytes."),
        ("fp16 -> int8", "fp sixteen to int eight"),
    ],
)
def test_an_arrow_is_read(text: str, expected: str):
    assert normalize_text(text) == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("模型有1.2B 参数。", "模型有十二亿参数。"),
        ("共有500M tokens和7B参数。", "共有五亿tokens和七十亿参数。"),
        ("参数量为7B。", "参数量为七B。"),  # a model size, said as written
        ("It has 1.2B parameters and 32k tokens.", "It has one point two billion parameters and thirty two thousand tokens."),
        ("a 7B model", "a seven B model"),
    ],
)
def test_a_scale_letter_before_what_it_counts_is_a_scale(text: str, expected: str):
    assert normalize_text(text) == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("MOS下降了-0.05。", "MOS下降了负零点零五。"),
        ("利润下降-12.5%。", "利润下降百分之十二点五。"),
        ("The change was -0.05.", "The change was minus zero point zero five."),
    ],
)
def test_a_signed_figure_keeps_its_sign(text: str, expected: str):
    assert normalize_text(text) == expected


# --- scholarly apparatus ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        ("V. Weston: From Ritual to Romance; chapter on the Fisher King.",
         "See Weston: From Ritual to Romance; chapter on the Fisher King."),
        ("thirty one. V. Tristan und Isolde, i, verses 5-8.",
         "thirty one. See Tristan und Isolde, one, verses five to eight."),
        ("four hundred thirty one. V. Kyd's Spanish Tragedy.", "four hundred thirty one. See Kyd's Spanish Tragedy."),
        ("307. V. St. Augustine's Confessions: to Carthage.",
         "three hundred seven. See Saint Augustine's Confessions: to Carthage."),
        ("V. The Rose", "five. The Rose"),  # a heading's number
        ("IV. The Clover. V. The Rose.", "four. The Clover. five. The Rose."),
        ("She met V. Woolf, the writer.", "She met V. Woolf, the writer."),  # an initial
        ("Cf. Ezekiel 2:1.", "Compare Ezekiel chapter two, verse one."),
        ("Cf. Ps. 23:1-4.", "Compare Ps. chapter twenty three, verses one to four."),
        ("见以西结书2:1。", "见以西结书二章一节。"),
        ("The ratio is 2:1.", "The ratio is two to one."),
        ("Ovid, Metamorphoses, iii. 55-7.", "Ovid, Metamorphoses, three. fifty five to fifty seven."),
        ("pp. 123-5", "pages one hundred twenty three to one hundred twenty five"),
        ("lines 45-9", "lines forty five to forty nine"),
        ("from 1990-91", "from nineteen ninety to ninety one"),
        ("In Parts II and III we see.", "In Parts two and three we see."),
        ("63. Cf. Inferno iii. 55-7.", "sixty three. Compare Inferno three. fifty five to fifty seven."),
        ("42. Id. iii, verse 24.", "forty two. Id. three, verse twenty four."),
        ("Cf. Antony and Cleopatra, II. ii., l. 190.", "Compare Antony and Cleopatra, two. two. line one hundred ninety."),
        ("V. Götterdämmerung, III. i: the end.", "See Gotterdammerung, three. one: the end."),
        ("Froude, Vol. I, ch. iv, a letter.", "Froude, Vol. one, ch four, a letter."),
        ("He said, i think so.", "He said, i think so."),
        ("On vi, the tool, ch li runs.", "On vi, the tool, ch li runs."),  # no title opens a sentence
        ("Books I, II and IV.", "Books one, two and four."),
        ("a, b, mix, and", "a, b, mix, and"),
    ],
)
def test_references_of_notes_and_citations(text: str, expected: str):
    assert normalize_text(text) == expected
