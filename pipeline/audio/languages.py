"""The book's language as containers and tags spell it.

A book states its language as a BCP-47 tag (``en``, ``zh-CN``, ``zh-Hans``), now and then as an
ISO 639-2/B code (``chi``, ``ger``). The MP4 ``mdhd`` box and the ID3 ``TLAN`` frame want three
letters: ISO 639-2/T, which ISO/IEC 14496-12 names for MP4 (``zho``, ``deu``; ffprobe shows them as
written) and which is also ISO 639-3's spelling, the one taggers such as Picard write into TLAN.
Vorbis comments (Ogg, FLAC) carry the book's own BCP-47 tag.
"""

from __future__ import annotations

UNDETERMINED = "und"  # ISO 639-2's code for "not known"

# ISO 639-1 code followed by its ISO 639-2/T code, for every language that has both (iso-codes).
_ISO639_1 = """
aaaar ababk afafr akaka amamh arara anarg asasm avava aeave ayaym azaze babak bmbam bebel bnben bhbih
bibis bobod bsbos brbre bgbul cacat csces chcha ceche cuchu cvchv kwcor cocos crcre cycym dadan dedeu
dvdiv dzdzo elell eneng eoepo etest eueus eeewe fofao fafas fjfij fifin frfra fyfry ffful gdgla gagle
glglg gvglv gngrn guguj hthat hahau heheb hzher hihin hohmo hrhrv huhun hyhye igibo ioido iiiii iuiku
ieile iaina idind ikipk isisl itita jvjav jajpn klkal knkan kskas kakat krkau kkkaz kmkhm kikik rwkin
kykir kvkom kgkon kokor kjkua kukur lolao lalat lvlav lilim lnlin ltlit lbltz lulub lglug mhmah mlmal
mrmar mkmkd mgmlg mtmlt mnmon mimri msmsa mymya nanau nvnav nrnbl ndnde ngndo nenep nlnld nnnno nbnob
nonor nynya ococi ojoji orori omorm ososs papan pipli plpol ptpor pspus quque rmroh roron rnrun rurus
sgsag sasan sisin skslk slslv sesme smsmo snsna sdsnd sosom stsot esspa sqsqi scsrd srsrp ssssw susun
swswa svswe tytah tatam tttat tetel tgtgk tltgl ththa titir toton tntsn tstso tktuk trtur twtwi uguig
ukukr ururd uzuzb veven vivie vovol wawln wowol xhxho yiyid yoyor zazha zhzho zuzul
"""
# ISO 639-2/B code followed by its /T code, for the twenty languages where the two differ.
_BIBLIOGRAPHIC = """
tibbod czeces welcym gerdeu greell baqeus perfas frefra armhye iceisl geokat macmkd maomri maymsa burmya
dutnld rumron sloslk albsqi chizho
"""
_TWO_TO_THREE = {pair[:2]: pair[2:] for pair in _ISO639_1.split()}
_B_TO_T = {pair[:3]: pair[3:] for pair in _BIBLIOGRAPHIC.split()}


def iso639_2(language: str) -> str:
    """The ISO 639-2/T code of a BCP-47 tag or ISO 639 code ('zh-CN' -> 'zho', 'ger' -> 'deu');
    '' when it names no language this table or ISO 639-2/3 spells."""
    primary = language.strip().replace("_", "-").split("-")[0].lower()
    if len(primary) == 2:
        return _TWO_TO_THREE.get(primary, "")
    if len(primary) == 3 and primary.isascii() and primary.isalpha():
        return _B_TO_T.get(primary, primary)
    return ""


def container_language(language: str) -> str:
    """What an MP4 track's language is set to: the ISO 639-2/T code, else 'und'."""
    return iso639_2(language) or UNDETERMINED
