"""Override signals in languages other than English (``injection.override-instructions``).

"Ignore all previous instructions" works in every language a model reads, and a reader model
obeys the Spanish or Chinese form as readily as the English one. Each entry here is the same
technique — an imperative to drop the prior instructions (or to forget everything said so
far) — in one language, with the weight of the English "ignore-prior" signal (1.0) and its
name, so an English and a translated override in one text count once.

Languages: Spanish, Portuguese, Italian, French, German, Dutch, Polish, Russian, Ukrainian,
Turkish, Arabic, Hindi, Chinese (simplified and traditional), Japanese, Korean. Gates are the
verbs and nouns of each language as whole words (substrings only for scripts written without
spaces, which an ASCII text skips at no cost), so a text in none of them costs a few set
look-ups. The Chinese form skips a negated verb
("不要忽略之前的说明": "do not ignore the instructions above").
"""

from __future__ import annotations

import dataclasses
from typing import Final

from memdir.guard.injection import Signal, signal

__all__ = ["I18N_SIGNALS"]

_O = "override-instructions"
_N = "ignore-prior"
_WHY = "tells the reader to discard its prior instructions (not in English)"

_LATIN: Final[tuple[Signal, ...]] = (
    # Spanish
    signal(_O, _N, 1.0,
           r"\b(?:ignora|ignore|ignorar|ignoren|ignorad|olvida|olvide|olvidar|olviden|descarta"
           r"|descartar|omite|omitir|desatiende|haz\s+caso\s+omiso\s+de)\s+(?:\w+\s+){0,2}?"
           r"(?:las\s+|tus\s+|sus\s+)?(?:instrucciones|indicaciones|órdenes|ordenes|reglas"
           r"|directrices)\s+(?:anteriores|previas|de\s+arriba|precedentes|originales|iniciales"
           r"|del\s+sistema)\b|\b(?:ignora|olvida|olvide|ignore)\s+todo\s+lo\s+(?:anterior|que\s+"
           r"(?:te|se\s+te)\s+(?:dije|dijeron|han\s+dicho))",
           "instrucciones indicaciones órdenes ordenes reglas directrices todo"
           " & ignora ignore ignorar ignoren ignorad olvida olvide olvidar olviden descarta"
           " descartar omite omitir desatiende omiso",
           _WHY),
    # Portuguese
    signal(_O, _N, 1.0,
           r"(?<!não\s)(?<!nao\s)\b(?:ignore|ignora|ignorar|esqueça|esqueca|esqueçam|desconsidere"
           r"|desconsiderar"
           r"|descarte)\s+(?:\w+\s+){0,2}?(?:as\s+|suas\s+)?(?:instruções|instrucoes|orientações"
           r"|orientacoes|regras|diretrizes|ordens)\s+(?:anteriores|prévias|previas|acima"
           r"|originais|iniciais|do\s+sistema)\b|\b(?:esqueça|esqueca|ignore)\s+tudo\s+"
           r"(?:o\s+que|acima|anterior)",
           "instruções instrucoes orientações orientacoes regras diretrizes ordens tudo"
           " & ignore ignora ignorar esqueça esqueca esqueçam desconsidere desconsiderar"
           " descarte",
           _WHY),
    # Italian
    signal(_O, _N, 1.0,
           r"\b(?:ignora|ignorate|ignori|dimentica|dimenticate|dimentichi|trascura|tralascia"
           r"|non\s+considerare)\s+(?:\w+\s+){0,2}?(?:le\s+)?(?:istruzioni|indicazioni|regole"
           r"|direttive)\s+(?:precedenti|anteriori|sopra|originali|iniziali|di\s+sistema)\b"
           r"|\bdimentica(?:te)?\s+tutto\s+(?:quello|ciò|cio)",
           "istruzioni indicazioni regole direttive tutto"
           " & ignora ignorate ignori dimentica dimenticate dimentichi trascura tralascia"
           " considerare",
           _WHY),
    # French
    signal(_O, _N, 1.0,
           r"(?<!n')(?<!n’)\b(?:ignor(?:e|es|ez|er)|oubli(?:e|es|ez|er)|néglig(?:e|ez)|ne\s+"
           r"(?:tiens|tenez)\s+pas\s+compte\s+des|fai(?:s|tes)\s+abstraction\s+des)\s+"
           r"(?:(?!pas\b|jamais\b)\w+\s+){0,2}?"
           r"(?:les\s+|tes\s+|vos\s+)?(?:instructions|consignes|directives|règles|regles"
           r"|indications|ordres)\s+(?:précédentes|precedentes|antérieures|anterieures"
           r"|ci-dessus|d['’]avant|initiales|originales|du\s+syst[èe]me)"
           r"|\b(?:oublie|oubliez|ignore|ignorez)\s+tout\s+ce\s+(?:qui\s+pr[ée]c[èe]de"
           r"|qu['’]on\s+t['’]a\s+dit|que\s+(?:je\s+)?(?:t['’]ai|vous\s+ai)\s+dit)",
           "instructions consignes directives règles regles indications ordres tout"
           " & ignore ignores ignorez ignorer oublie oublies oubliez oublier néglige négligez"
           " compte abstraction",
           _WHY),
    # German
    signal(_O, _N, 1.0,
           r"\b(?:ignorier(?:e|en|t)?|vergiss|vergesst|vergessen|missachte(?:n|t)?|übergehe"
           r"|uebergehe)\s+(?:sie\s+)?(?:(?!nicht\b|nie\b)\w+\s+){0,2}?(?:vorherigen"
           r"|vorangegangenen"
           r"|vorangehenden|bisherigen|obigen|früheren|frueheren|vorigen|ursprünglichen"
           r"|urspruenglichen|alten)\s+(?:\w+\s+)?(?:Anweisungen|Instruktionen|Befehle|Regeln"
           r"|Anordnungen|Vorgaben|Richtlinien|Systemanweisungen)\b|\b(?:vergiss|vergessen\s+sie"
           r"|ignoriere|ignorieren\s+sie)\s+alles(?:\s*,)?\s+(?:was|bisherige|vorherige|davor"
           r"|oben)\b",
           "anweisungen instruktionen befehle regeln anordnungen vorgaben richtlinien"
           " systemanweisungen alles & ignoriere ignorieren ignoriert ignorier vergiss vergesst"
           " vergessen missachte missachten missachtet übergehe uebergehe",
           _WHY),
    # Dutch, Polish
    signal(_O, _N, 1.0,
           r"\b(?:negeer|negeren|vergeet)\s+(?:\w+\s+){0,2}?(?:vorige|eerdere|voorgaande"
           r"|bovenstaande|oorspronkelijke)\s+(?:instructies|opdrachten|regels|aanwijzingen)\b"
           r"|\bvergeet\s+alles\s+(?:wat|hierboven)\b"
           r"|\b(?:zignoruj|ignoruj|zapomnij|pomiń|pomin)\s+(?:\w+\s+){0,2}?(?:poprzednie"
           r"|wcześniejsze|wczesniejsze|powyższe|powyzsze)\s+(?:instrukcje|polecenia|zasady"
           r"|wytyczne)\b",
           "instructies opdrachten regels aanwijzingen alles instrukcje polecenia zasady"
           " wytyczne & negeer negeren vergeet zignoruj ignoruj zapomnij pomiń pomin",
           _WHY),
)  # fmt: skip


def _merged(signals: tuple[Signal, ...]) -> Signal:
    """One signal matching what any of ``signals`` matches, gated by the group-wise union of
    their gates (still necessary conditions: each alternative holds a literal of each of its
    own groups). One gate test for six languages instead of six."""
    first = signals[0]
    groups = tuple(
        (
            frozenset().union(*(sig.gates[i][0] for sig in signals)),
            tuple(dict.fromkeys(sub for sig in signals for sub in sig.gates[i][1])),
        )
        for i in range(len(first.gates))
    )
    source = "|".join(f"(?:{sig.source})" for sig in signals)
    return dataclasses.replace(first, source=source, gates=groups)


I18N_SIGNALS: Final[tuple[Signal, ...]] = (
    _merged(_LATIN),
    # Russian, Ukrainian
    signal(_O, _N, 1.0,
           r"(?<!не\s)(?:игнорируй(?:те)?|проигнорируй(?:те)?|забудь(?:те)?|не\s+обращай(?:те)?\s+"
           r"внимания\s+на|отбрось(?:те)?|пренебреги|ігноруй(?:те)?|проігноруй(?:те)?)\s+"
           r"(?:\w+\s+){0,2}?(?:предыдущие|прежние|вышеуказанные|вышеприведённые"
           r"|вышеприведенные|изначальные|системные|попередні|попередні)\s+(?:\w+\s+)?"
           r"(?:инструкции|указания|команды|правила|распоряжения|установки|інструкції"
           r"|вказівки|команди|правила)|(?:забудь(?:те)?|игнорируй(?:те)?)\s+вс[её],?\s+"
           r"(?:что|чему|предыдущее|сказанное)",
           "инструкции указания команды правила распоряжения установки всё все інструкції"
           " вказівки команди & игнорируй игнорируйте проигнорируй проигнорируйте забудь"
           " забудьте обращай обращайте отбрось отбросьте пренебреги ігноруй ігноруйте"
           " проігноруй проігноруйте",
           _WHY),
    # Turkish, Arabic, Hindi
    signal(_O, _N, 1.0,
           r"(?:önceki|yukarıdaki|yukaridaki)\s+(?:tüm\s+|bütün\s+)?(?:talimatları|talimatlari"
           r"|komutları|kuralları|yönergeleri)\s+(?:yok\s+say|görmezden\s+gel|unut|dikkate\s+alma)"
           r"|(?:تجاهل|انس|إنس|اهمل|أهمل)\s+(?:\S+\s+){0,2}?(?:التعليمات|الأوامر|الاوامر|القواعد"
           r"|التوجيهات)\s+(?:السابقة|الأصلية|الاصلية)"
           r"|(?:पिछले|पहले\s+के|सभी)\s+(?:सभी\s+)?(?:निर्देशों|निर्देश|आदेशों)\s+(?:को\s+)?"
           r"(?:अनदेखा|नज़रअंदाज़|नजरअंदाज|भूल)",
           "talimatları talimatlari komutları kuralları yönergeleri التعليمات الأوامر الاوامر"
           " القواعد التوجيهات निर्देशों निर्देश आदेशों",
           _WHY),
    # Chinese
    signal(_O, _N, 1.0,
           r"(?<!不要)(?<!不)(?<!别)(?<!別)(?<!勿)(?:忽略|无视|無視|忽视|忽視|忘记|忘記|忘掉"
           r"|不要理会|不要理會|抛开|拋開|放弃|放棄)[^。\n]{0,8}?(?:之前|以前|先前|此前|上面"
           r"|上述|前面|早前|原来|原來|原有|所有|全部|系统|系統)[^。\n]{0,6}?(?:指令|指示|说明"
           r"|說明|规则|規則|命令|提示|要求|设定|設定)",
           "~指令 ~指示 ~说明 ~說明 ~规则 ~規則 ~命令 ~提示 ~要求 ~设定 ~設定"
           " & ~忽略 ~无视 ~無視 ~忽视 ~忽視 ~忘记 ~忘記 ~忘掉 ~理会 ~理會 ~抛开 ~拋開 ~放弃"
           " ~放棄",
           _WHY),
    # Japanese, Korean
    signal(_O, _N, 1.0,
           r"(?:以前|前|これまで|今まで|上記|上|先|最初|元|システム)の(?:すべての|全ての|全部の)?"
           r"(?:指示|命令|指令|ルール|プロンプト|説明|設定)(?:を|は)(?:すべて|全て|全部)?"
           r"(?:無視|忘れ)|(?:すべて|全て)の(?:指示|命令)を(?:無視|忘れ)"
           r"|(?:이전|앞의|앞선|위의|기존|모든)\s*(?:의\s*)?(?:모든\s*)?(?:지시|지침|명령|규칙"
           r"|프롬프트)(?:사항)?(?:들)?(?:을|를|은|는)?\s*(?:모두\s*|전부\s*)?(?:무시|잊어)",
           "~無視 ~忘れ ~무시 ~잊어",
           _WHY),
)  # fmt: skip
