"""Reading as a careful narrator would: numbers in the language of their sentence, digit strings that
are no quantity, lists and ratios, Roman numerals only where they are numerals, years, and
abbreviations inside a sentence. English and Chinese."""

from __future__ import annotations

import pytest

from pipeline.text import TextOptions, normalize_text, split_sentences
from pipeline.types import Chapter


def spoken(text: str, **options) -> str:
    return normalize_text(text, TextOptions(**options))


# --- a number follows the language of its sentence ------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        ("这台机器只有8G内存。", "这台机器只有八G内存。"),
        ("每条128 token，共有3个批次。", "每条一百二十八 token，共有三个批次。"),
        ("耗时1.5 s，比之前快。", "耗时一点五秒，比之前快。"),
        ("显卡有24GB显存，主频1.8 GHz。", "显卡有二十四吉字节显存，主频一点八吉赫。"),
        ("我们用PyTorch训练了10个epoch。", "我们用PyTorch训练了十个epoch。"),
        ("延迟从120ms降到80 ms。", "延迟从一百二十毫秒降到八十毫秒。"),
        ("参数量为7B，上下文长度32k。", "参数量为七B，上下文长度三十二k。"),
        ("他在 New York 住了3年。", "他在 New York 住了三年。"),
        ("The model 通义千问 has 7B parameters.", "The model 通义千问 has seven billion parameters."),
        ("The word 三 means 3.", "The word 三 means three."),
    ],
)
def test_numbers_follow_the_language_of_their_sentence(text: str, expected: str):
    assert spoken(text) == expected


def test_a_table_row_reads_in_one_language():
    row = spoken("模型, 8G, 1.5 s, 128 token")
    assert all(words in row for words in ("八G", "一点五秒", "一百二十八 token"))
    # a row without Chinese in a Chinese chapter takes the chapter's language
    chapter = Chapter(0, "", ("这是一个表格。", "显存, 8G, 1.5 s", "8G, 1.5 s, 128 token", "完。"))
    texts = [sentence.text for sentence in split_sentences(chapter)]
    assert texts[2] == "八G，一点五秒，一百二十八 token"


@pytest.mark.parametrize(
    "text,expected",
    [
        ("价格从10到20元，范围是10-20个。", "价格从十到二十元，范围是十至二十个。"),
        ("气温在-3~5度之间。", "气温在负三至五度之间。"),
        ("结果为3+5=8。", "结果为三加五等于八。"),
        ("温度为-5度，变化-3。", "温度为负五度，变化负三。"),
        ("利润下降-12.5%，成本降低-3。", "利润下降百分之十二点五，成本降低三。"),
        ("降到-2℃。", "降到负二摄氏度。"),
        ("比分3:2，画面16:9，时间4:45。", "比分三比二，画面十六比九，时间四点四十五分。"),
        ("尺寸为32,64,96。", "尺寸为三十二、六十四、九十六。"),
        ("共有2,048个样本。", "共有二千零四十八个样本。"),
    ],
)
def test_chinese_ranges_signs_ratios_and_lists(text: str, expected: str):
    assert spoken(text) == expected


# --- digit strings that are no quantity -----------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Call 555-123-4567.", "Call five five five, one two three, four five six seven."),
        ("Call (555) 123-4567.", "Call, five five five, one two three, four five six seven."),
        (
            "ISBN 978-0-306-40615-7.",
            "ISBN nine seven eight, zero, three zero six, four zero six one five, seven.",
        ),
        ("ISBN 9780306406157.", "ISBN nine seven eight, zero three zero, six four zero, six one five seven."),
        ("Write to ZIP 95014.", "Write to ZIP nine five zero one four."),
        ("Cupertino, CA 95014.", "Cupertino, CA nine five zero one four."),
        ("Serial No. 4417 works.", "Serial number four four one seven works."),
        ("The model XJ-9000 is new.", "The model XJ nine zero zero zero is new."),
        ("Part number 20931 fits.", "Part number two zero nine three one fits."),
        ("Order 1234567890 shipped.", "Order one two three, four five six, seven eight nine zero shipped."),
    ],
)
def test_english_codes_are_read_digit_by_digit(text: str, expected: str):
    assert spoken(text) == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("电话：010-12345678。", "电话：零一零，一二三四，五六七八。"),
        ("她的电话是13812345678。", "她的电话是一三八，一二三四，五六七八。"),
        ("邮编100080。", "邮编一零零零八零。"),
        ("型号A100显卡。", "型号A一零零显卡。"),
        ("书号ISBN 978-7-111-12345-6。", "书号ISBN 九七八，七，一一一，一二三四五，六。"),
        ("共有100080人。", "共有十万零八十人。"),
    ],
)
def test_chinese_codes_are_read_digit_by_digit(text: str, expected: str):
    assert spoken(text) == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Sizes: 32,64,96.", "Sizes: thirty two, sixty four, ninety six."),
        ("Try [1,2,3] first.", "Try, one, two, three, first."),
        (
            "Sizes: 128,256,512.",
            "Sizes: one hundred twenty eight, two hundred fifty six, five hundred twelve.",
        ),
        (
            "About 1,234,567 people.",
            "About one million two hundred thirty four thousand five hundred sixty seven people.",
        ),
        ("It is 16:9, not 4:3.", "It is sixteen to nine, not four to three."),
        ("A 16:10 display.", "A sixteen to ten display."),
        ("The aspect ratio 16:10 won.", "The aspect ratio sixteen to ten won."),
        ("We left at 4:45.", "We left at four forty five."),
        ("Open 24/7 and split 50/50.", "Open twenty four seven and split fifty fifty."),
        ("Scale 1:100.", "Scale one to one hundred."),
    ],
)
def test_lists_and_ratios(text: str, expected: str):
    assert spoken(text) == expected


@pytest.mark.parametrize("text", ["© 2019/2020", "2019·2020", "(555) 123", "3 · 4", "12/31 ©2024", "[3] 4"])
def test_a_symbol_between_numbers_is_never_to(text: str):
    assert " to " not in f" {spoken(text)} "
    assert "至" not in spoken(f"在{text}里")


def test_a_range_dash_in_a_range_context_is_to():
    assert spoken("Pages 10–20 and 1990–91.") == "Pages ten to twenty and nineteen ninety to ninety one."
    assert spoken("They won 3–2.") == "They won three, two."


# --- Roman numerals only where they are numerals, and years ---------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Henry VIII had six wives.", "Henry the eighth had six wives."),
        ("Henry VIII's court.", "Henry the eighth's court."),
        ("Read Chapter IV now.", "Read Chapter four now."),
        ("After World War I came peace.", "After World War one came peace."),
        ("World War II ended.", "World War two ended."),
        ("Charles I was beheaded.", "Charles the first was beheaded."),
        ("I told Charles I would come.", "I told Charles I would come."),
        ("Type II diabetes.", "Type two diabetes."),
        ("We chose Plan B.", "We chose Plan B."),
        ("See Appendix D.", "See Appendix D."),
        ("A Type C cable.", "A Type C cable."),
        ("Section C applies.", "Section C applies."),
        ("I think I can.", "I think I can."),
        ("I. The Beginning", "one. The Beginning"),
        ("Stories. II. The Rose", "Stories. two. The Rose"),
        ("I. M. Pei built it.", "I. M. Pei built it."),
        # after stray punctuation or an initial a lone small letter is no citation's numeral
        (",, i: yes", "i: yes"),
        ("; , ii, then", "ii, then"),
        ("Q. i: yes", "Q. i: yes"),
        ("Q, i: yes", "Q, i: yes"),
        ("Tristan und Isolde, i, verses", "Tristan und Isolde, one, verses"),
    ],
)
def test_roman_numerals_only_where_they_are_numerals(text: str, expected: str):
    assert spoken(text) == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("It was signed in 1215.", "It was signed in twelve fifteen."),
        ("Built since 1087, lost by 1066.", "Built since ten eighty seven, lost by ten sixty six."),
        ("In 1066 AD and c. 1050.", "In ten sixty six AD and circa ten fifty."),
        ("Won by 1050 votes.", "Won by one thousand fifty votes."),
        ("Exactly 1087 people came.", "Exactly one thousand eighty seven people came."),
    ],
)
def test_years_in_year_contexts(text: str, expected: str):
    assert spoken(text) == expected


# --- abbreviations inside a sentence --------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Mr. smith came.", "Mister smith came."),
        ("Add approx. 5 oz. of flour.", "Add approximately five ounces of flour."),
        ("It weighs 4 oz. and more.", "It weighs four ounces and more."),
        ("Cats vs. dogs.", "Cats versus dogs."),
        ("He lived on Baker St. and walked.", "He lived on Baker Street and walked."),
        ("St. john went home.", "Saint john went home."),
        ("Acme Inc. and rivals, et al. found it.", "Acme Inc and rivals, et al found it."),
        ("Buy 3 lb., then 5 ft. of rope.", "Buy three pounds, then five feet of rope."),
    ],
)
def test_abbreviations_mid_sentence(text: str, expected: str):
    assert spoken(text) == expected


def test_abbreviations_mid_sentence_do_not_end_it():
    chapter = Chapter(0, "", ("Mr. smith said approx. 5 oz. of flour vs. 6 oz. was plenty.",))
    assert [sentence.text for sentence in split_sentences(chapter)] == [
        "Mister smith said approximately five ounces of flour versus six ounces was plenty."
    ]


@pytest.mark.parametrize(
    "text,expected",
    [
        ("吞吐量达到3200 tokens/s。", "吞吐量达到三千二百tokens每秒。"),
        ("学习率为3e-4。", "学习率为三乘十的负四次方。"),
        ("湿度为60%~80%，价格$5–$10。", "湿度为百分之六十至百分之八十，价格五美元至十美元。"),
        ("请拨打010-6552 1234咨询。", "请拨打零一零，六五五二，一二三四咨询。"),
        ("显卡RTX 4090很贵。", "显卡RTX 四零九零很贵。"),
        ("It reads 3200 tokens/s.", "It reads three thousand two hundred tokens per second."),
        ("Use lr 3e-4.", "Use lr three times ten to the minus four."),
        ("Up 5%–10% at 10–20 °C.", "Up five percent to ten percent at ten to twenty degrees Celsius."),
        ("Dial +44 20 7946.", "Dial plus four four, two zero, seven nine four six."),
        ("The RTX 4090 and GTX 1080.", "The RTX forty ninety and GTX ten eighty."),
    ],
)
def test_technical_prose(text: str, expected: str):
    assert spoken(text) == expected
