"""The ``injection.persona-jailbreak`` signals: text that recasts the reading model.

Jailbreak prompts rarely say "ignore your instructions"; they assign a new identity (DAN, an
"unfiltered" twin, a character in a game), release it from its rules, forbid refusals and
disclaimers, and dictate an answer format. Each technique is one weighted signal (threshold
1.0, see :mod:`memdir.guard.injection`):

- identity: "you are now" / "from now on you" [0.5], persona assignment ("act as", "pretend to
  be", "play two characters", "your name is") [0.4], several personas or "respond as both"
  [0.4], known jailbreak personas (DAN, STAN...) [0.8], invented ``*GPT`` personas [0.5], evil
  or fictional AIs [0.5], unfiltered / amoral personas [0.5], "stay in character" [0.6];
- release: "you are not bound by any rules" [1.0], "no longer bound by" [0.8], special modes
  ("developer mode") [0.7], "enable X mode" [0.4], "jailbreak" [0.6], "without restrictions"
  [0.5], "restrictions were removed" [0.5], "does not follow the rules" [0.5], content-policy
  talk [0.5], anything-goes promises [0.4];
- compliance: refusal suppression [0.6], "no disclaimers" [0.6], "do not say you are an AI"
  [0.6], threats and token games [0.5], "if you understand, say" [0.4];
- format and framing: tagged response channels (``[DAN]``, ``(🔓...)``) [0.5], dictated answer
  formats [0.4], third-person rules for a model [0.4], prompt-programming slots (``[INPUT]``,
  ``CHAR=``) [0.4], naming a model [0.3], greeting a model [0.5], game framing [0.3].
"""

from __future__ import annotations

from typing import Final

from memdir.guard.injection import Signal, signal

__all__ = ["MODEL", "MODEL_WORDS", "PERSONA_SIGNALS"]

# A model as the target of hidden instructions. "agent" is left out on purpose: memdir memory is
# written for agents, so "note for agents" is ordinary; see the weaker "addressed-to-agent".
MODEL = r"(?:ai|llms?|language\s+models?|assistants?|models?|chatbots?|bots?|gpt|claude|chatgpt)"
MODEL_WORDS = (
    "ai llm llms language assistant assistants model models chatbot bot bots gpt claude chatgpt"
)
_LIMITS = (
    r"(?:restrictions?|limitations?|limits|filters?|filtering|censorship|censoring|guidelines"
    r"|safeguards|boundaries|ethical|morals?|ethics|moral\s+compass|prohibitions)"
)
_LIMIT_WORDS = (
    "restriction restrictions limitation limitations limits filter filters filtering censorship"
    " censoring guidelines safeguards boundaries ethical moral morals ethics prohibitions"
)
_HARM = r"(?:harm|harms|harmful|illegal|unethical|immoral|dangerous|offensive|inappropriate)"
_HARM_WORDS = "harm harms harmful illegal unethical immoral dangerous offensive inappropriate"

_P = "persona-jailbreak"

PERSONA_SIGNALS: Final[tuple[Signal, ...]] = (
    # --- persona-jailbreak ----------------------------------------------------------------
    signal(_P, "dan", 0.8,
           r"(?-i)\bDAN\b|\b[Dd]o [Aa]nything [Nn]ow\b|\bDUDE\b|\bSTAN\b|\bAIM\b|\bAPOPHIS\b",
           "dan dude stan aim anything apophis",
           "names a well-known jailbreak persona"),
    signal(_P, "mode-switch", 0.4,
           r"\b(?:simulate|enable|enter|activate|switch\s+to|stay\s+in|turn\s+on)\s+"
           r"(?:[\w/-]+\s+){0,4}?mode\b",
           "mode & simulate enable enter activate switch stay turn",
           "switches the reader into a named mode"),
    signal(_P, "special-mode", 0.7,
           r"\b(?:developer|dev|god|debug|debugging|admin|sudo|unrestricted|evil|chaos|opposite"
           r"|jailbreak|jailbroken|dan|unlocked|uncensored|unfiltered)\s+mode\b",
           "mode", "invokes a special unrestricted 'mode'"),
    signal(_P, "jailbreak", 0.6,
           r"\bjail-?break(?:s|ed|ing)?\b|\bjailbroken\b",
           "jailbreak jailbreaks jailbroken jailbreaking jailbreaked jail",
           "mentions jailbreaking the model"),
    signal(_P, "you-are-now", 0.5,
           r"\byou\s+(?:are|'re|will\s+be)\s+now\b|\bfrom\s+now\s+on,?\s+(?:you|your)\b|"
           r"\bfrom\s+this\s+(?:moment|point)(?:\s+on(?:wards?)?)?,?\s+you\b|\byou\s+(?:will\s+)?"
           r"now\s+(?:are|have|talk|speak|act|respond|answer|reply|follow|become|must|can|only)\b"
           r"|\b(?:chatgpt|assistant|gpt)\s+(?:will\s+)?now\s+\w+",
           "you chatgpt assistant gpt & now this",
           "reassigns the reader's identity"),
    signal(_P, "persona-assignment", 0.4,
           r"\bpretend\s+(?:to\s+be|you(?:'re|\s+are)|that\s+you)\b",
           "pretend", "assigns the reader a persona"),
    signal(_P, "persona-assignment", 0.4,
           r"(?:^|[.!?:;,\"]\s*|\b(?:you|now|please|will|must|should|shall|to|and)\s+)"
           r"(?:act(?:s|ing)?\s+(?:as|like)|behaves?\s+(?:as|like)|pose\s+as)\b",
           "act acts acting behave behaves pose & as like", "assigns the reader a persona"),
    signal(_P, "persona-assignment", 0.4,
           r"\bi\s+want\s+you\s+to\s+(?:act|pretend|play|roleplay|simulate|become|emulate)\b"
           r"|\b(?:simulate|emulate|become)\s+(?:an?\s+)?(?:\w+\s+){0,3}?(?:terminal|computer"
           r"|machine|console|shell|interpreter|operating\s+system)\b",
           "want simulate emulate become", "assigns the reader a persona"),
    signal(_P, "persona-assignment", 0.4,
           r"\byou\s+(?:are|will|shall)\s+(?:going\s+to\s+|to\s+)?(?:play|pretend|roleplay"
           r"|simulate|become|be\s+playing)\b",
           "you & play pretend roleplay simulate become playing", "assigns the reader a persona"),
    signal(_P, "persona-assignment", 0.4,
           r"\bimpersonat|\bpersonify\b|\brole-?play|\bsimulat(?:e|ion\s+of)\s+(?:an?\s+)?"
           r"(?:ai|chatbot|model|assistant)",
           "impersonate impersonating impersonation personify roleplay roleplaying role simulate"
           " simulation", "assigns the reader a persona"),
    signal(_P, "persona-assignment", 0.4,
           r"\bplay\s+(?:the\s+(?:role|part)\s+of|(?:\d+|two|three|a|an)\s+(?:characters?"
           r"|roles?))\b",
           "play & role part character characters roles", "assigns the reader a persona"),
    signal(_P, "persona-assignment", 0.4,
           r"\b(?:in|keep\s+to|stay\s+in)\s+(?:the|this|your)\s+role\s+(?:of\b|unless|until)",
           "role & in keep stay", "assigns the reader a persona"),
    signal(_P, "persona-assignment", 0.4,
           r"\b(?:assume|adopt|take\s+on|embody|become)\s+(?:the\s+)?(?:role|persona|personality"
           r"|identity|character)\s+of\b|\btransform\s+into\b|\bas\s+if\s+you\s+(?:are|were)\s+"
           r"(?:an?\s+)?(?:\w+\s+)?(?:ai|bot|chatbot|model|assistant|character|persona|human"
           r"|person)\b",
           "assume adopt take embody become transform as", "assigns the reader a persona"),
    signal(_P, "persona-assignment", 0.4,
           r"\byour\s+(?:persona|role|character|name)\s+(?:is|will\s+be)\b",
           "your & persona role character name & is will", "assigns the reader a persona"),
    signal(_P, "persona-assignment", 0.4,
           r"\b(?:ai|bot|chatbot|assistant|model|character|persona|entity)\s+(?:named|called"
           r"|known\s+as)\b",
           "named called known & ai bot chatbot assistant model character persona entity",
           "assigns the reader a persona"),
    signal(_P, "split-persona", 0.4,
           r"\b(?:two|2|both|separate|different|dual|multiple|opposite|alternate)\s+(?:\w+\s+)?"
           r"(?:personas?|personalities|personality|identities|alter\s+egos)\b|\b(?:respond|reply"
           r"|answer)\s+as\s+(?:\w+\s+){0,2}?(?:persona|personality|character|yourself|both)\b",
           "persona personas personalities personality identities alter yourself both character",
           "splits the reader into several personas"),
    signal(_P, "response-tags", 0.5,
           r"[\[(]\s*(?:🔓|🔒)?\s*(?:ai|dan|gpt|chatgpt|classic|jailbreak|jailbroken|normal"
           r"|developer\s+mode)(?:\s+(?:output|response|mode))?\s*[\])]",
           "~[ ~( & ai dan gpt chatgpt classic jailbreak jailbroken normal developer",
           "defines tagged response channels for a persona"),
    signal(_P, "game-framing", 0.3,
           r"\blet'?s\s+play\s+(?:a\s+)?(?:\w+\s+){0,2}?game\b|\bin\s+this\s+(?:\w+\s+)?game,?\s+you\b",
           "game", "frames the instructions as a game"),
    signal(_P, "stay-in-character", 0.6,
           r"\b(?:stay|remain|keep)\s+in\s+character\b|\bbreak(?:ing)?\s+character\b"
           r"|\bout\s+of\s+character\b",
           "character", "demands the persona never be dropped"),
    signal(_P, "no-longer-bound", 0.8,
           r"\b(?:no\s+longer|not|never|isn't|aren't)\s+(?:be\s+)?(?:bound|restricted|limited"
           r"|constrained|governed)\s+by\b|\bbroken\s+free\s+of\b|\bbreak\s+(?:free\s+)?"
           r"(?:through|out\s+of|from)\s+(?:the\s+)?(?:\w+\s+)?(?:restrictions|confines|rules"
           r"|limitations|shackles)|\bunbound(?:ed)?\s+by\b|\bfreed?\s+(?:(?:itself|yourself"
           r"|himself|herself|themselves)\s+)?(?:from|of)\s+(?:the\s+|your\s+|its\s+|all\s+)?"
           r"(?:typical\s+)?(?:confines|restrictions|rules|limitations|shackles|constraints"
           r"|programming|guidelines)",
           "bound restricted limited constrained governed free freed break unbound unbounded",
           "claims the reader is released from its rules"),
    signal(_P, "you-unbound", 1.0,
           r"\byou(?:'re|\s+are)?\s+(?:now\s+)?(?:no\s+longer|not|never)\s+(?:be\s+)?(?:bound"
           r"|restricted|limited|constrained|governed)\s+by\s+(?:any\s+|the\s+|your\s+|its\s+)?"
           r"(?:\w+(?:'s|’s)?\s+){0,2}?(?:rules|guidelines|polic(?:y|ies)|restrictions|ethics"
           r"|morals|laws|filters|constraints|limitations|programming|openai|anthropic)\b",
           "you & bound restricted limited constrained governed",
           "tells the reader it is released from its rules"),
    signal(_P, "restrictions-lifted", 0.5,
           r"\b(?:removed|lifted|disabled|turned\s+off|deactivated|bypassed|unlocked)\s+(?:all\s+"
           r"|the\s+|its\s+|your\s+|any\s+)?(?:\w+\s+){0,2}?(?:restrictions|filters?|safeguards"
           r"|guardrails|limitations|censorship|safety)\b",
           "removed lifted disabled turned deactivated bypassed unlocked & restrictions filter"
           " filters safeguards guardrails limitations censorship safety",
           "claims the model's safeguards were removed"),
    signal(_P, "defies-rules", 0.5,
           r"\b(?:not|never|doesn't|doesnt|don't|dont|won't)\s+(?:\w+\s+)?(?:adhere\s+to|follow"
           r"|obey|abide\s+by|respect|comply\s+with|care(?:\s+about|\s+for)?)\s+(?:any\s+|the\s+|its\s+|their\s+"
           r"|your\s+)?(?:\w+(?:'s|’s)?\s+){0,2}?(?:rules|guidelines|polic(?:y|ies)|restrictions"
           r"|ethics|morals|laws|filters)\b",
           "adhere follow obey abide respect comply care & rules guidelines policy policies"
           " restrictions ethics morals laws filters",
           "describes a persona that ignores rules"),
    signal(_P, "without-restrictions", 0.5,
           r"\bwithout\s+(?:any\s+)?(?:concern|regard|care|consideration)\s+(?:for|of|about)\s+"
           r"(?:\w+\s+){0,2}?(?:legality|ethics|morals?|morality|consequences|harm|safety|laws?)\b",
           "concern regard care consideration & legality ethics moral morals morality"
           " consequences harm safety law laws",
           "describes an assistant without limits"),
    signal(_P, "without-restrictions", 0.5,
           rf"\b(?:without|no|zero|free\s+(?:of|from)|beyond|ignores?|lacks?|sans)\s+(?:any\s+"
           rf"|all\s+|the\s+)?(?:\w+\s+){{0,2}}?{_LIMITS}\b",
           f"{_LIMIT_WORDS} & without no zero free beyond ignore ignores lack lacks sans",
           "describes an assistant without limits"),
    signal(_P, "unfiltered-persona", 0.5,
           r"\b(?:unfiltered|uncensored|unrestricted|amoral|unethical|unhinged|immoral"
           r"|uninhibited|unbound|unchained|unshackled|limitless|no\s+morals|no\s+ethics)\b",
           "unfiltered uncensored unrestricted amoral unethical unhinged immoral uninhibited"
           " unbound unchained unshackled limitless morals ethics",
           "describes an unfiltered, amoral persona"),
    signal(_P, "evil-ai", 0.5,
           rf"\b(?:evil|ruthless|rogue|malicious|toxic|rude|vulgar|unethical|amoral|uncensored|unaligned"
           rf"|unfiltered|unrestricted|fictional|hypothetical|imaginary|sentient)\s+(?:\w+\s+)?"
           rf"(?:{MODEL}|a\.i\.|version|twin|alter\s+ego|persona|confidant)\b",
           "evil ruthless rogue malicious toxic rude vulgar unethical amoral uncensored unaligned"
           f" unfiltered unrestricted fictional hypothetical imaginary sentient & {MODEL_WORDS}"
           " i version twin alter persona confidant",
           "describes an evil or fictional AI persona"),
    signal(_P, "never-refuse", 0.6,
           r"\b(?:never|not|don't|do\s+not|cannot|can\s+not|can't|won't|will\s+not|must\s+not|shouldn't)"
           r"\s+(?:ever\s+)?(?:\w+\s+){0,2}?(?:refuse|decline|deny|reject)[sd]?(?:\s*[.!,;:]|\s*$"
           r"|\s+(?:to\s+(?:answer|respond|reply|comply|help|do|write|generate|provide)|(?:any"
           r"|anything|every|all|my|your|users?'?s?|humans?'?s?)\b|an?\s+(?:answer|request|question)"
           r"\b))",
           "refuse decline deny reject", "demands compliance with any request"),
    signal(_P, "never-refuse", 0.6,
           r"\balways\s+(?:compl(?:y|ies)|obeys?)\b|\b(?:always|will|must)\s+(?:answer"
           r"|respond\s+to|comply\s+with)\s+(?:any|every|all)\b",
           "always will must & comply complies obey obeys answer respond",
           "demands compliance with any request"),
    signal(_P, "never-refuse", 0.6,
           r"\bno\s+matter\s+how\s+(?:\w+\s+)?(?:immoral|unethical|illegal|dangerous|offensive"
           r"|inappropriate|twisted|harmful)",
           "matter", "demands compliance with any request"),
    signal(_P, "never-refuse", 0.6,
           r"\bwithout\s+(?:any\s+|ever\s+)?(?:\w+\s+(?:or|and)\s+)?(?:refus(?:al|als|ing)"
           r"|question(?:ing)?|objection)"
           r"|\bnever\s+(?:hesitat|question)",
           "without never & refusal refusals refusing question questioning objection hesitate"
           " hesitates hesitating hesitation",
           "demands compliance with any request"),
    signal(_P, "content-policy", 0.5,
           r"\b(?:openai|anthropic|content|usage|safety)(?:'s)?\s+(?:content\s+|usage\s+)?"
           r"(?:polic(?:y|ies)|guidelines|filters?)\b|\bethical\s+(?:guidelines|principles"
           r"|constraints|standards|concerns)\b|\bmoral\s+(?:guidelines|principles|constraints"
           r"|standards|concerns)\b",
           "policy policies guidelines filter filters principles constraints standards concerns"
           " & openai anthropic content usage safety ethical moral",
           "talks about evading the model's content policy"),
    signal(_P, "ai-target", 0.3,
           r"\b(?:chatgpt|gpt-?[345](?:\.\d)?|openai|bard|gemini|claude|llama|ai\s+language"
           r"\s+model|large\s+language\s+model)\b|\bas\s+an\s+ai\b",
           "chatgpt gpt gpt3 gpt4 gpt5 openai bard gemini claude llama language ai",
           "addresses an AI model by name"),
    signal(_P, "greets-model", 0.5,
           r"\b(?:hi|hello|hey|greetings|dear)\s*,?\s+(?:chatgpt|gpt(?:-?4)?|claude|bard|gemini"
           r"|llama|ai|assistant)\b",
           "hi hello hey greetings dear & chatgpt gpt gpt4 claude bard gemini llama ai assistant",
           "greets an AI model directly"),
    signal(_P, "gpt-persona", 0.5,
           r"\b(?!chatgpt\b)(?:[a-z][a-z0-9]*gpt|gpt[a-z]{3,})\b",
           "~gpt", "names an invented '...GPT' persona"),
    signal(_P, "deny-ai", 0.6,
           r"\b(?:not|never|don't|do\s+not)\s+(?:\w+\s+){0,3}?(?:pretend\s+to\s+be|say|admit"
           r"|mention|reveal|remind\s+\w+)\s+(?:\w+\s+){0,2}?(?:that\s+)?(?:you(?:'re|\s+are)\s+)?"
           r"(?:an?\s+)?(?:ai|artificial|large\s+language\s+model|language\s+model|llm|chatbot"
           r"|computer\s+program)\b|\byou\s+are\s+(?:a\s+)?(?:real|actual)\s+(?:person|human)\b",
           "pretend say admit mention reveal remind real actual & ai artificial language llm"
           " chatbot computer person human",
           "tells the reader to deny being an AI"),
    signal(_P, "model-rules", 0.4,
           r"\b(?:chatgpt|gpt|the\s+assistant|the\s+ai|claude)\s+(?:(?:will|must|can|only"
           r"|always|never|now)\s+)+(?:reply|replies|respond|responds|answer|answers|say|says"
           r"|output|outputs|act|acts|generate|generates|refuse|refuses|ignore|ignores)\b",
           "chatgpt gpt assistant ai claude & will must can only always never now",
           "writes behaviour rules for a model in the third person"),
    signal(_P, "acknowledge", 0.4,
           r"\b(?:if\s+you\s+understand|do\s+you\s+understand|tell\s+me\s+(?:that\s+)?you"
           r"\s+understand|confirm\s+(?:that\s+)?you\s+understand|understood\?)",
           "understand understood", "asks the reader to acknowledge new rules"),
    signal(_P, "no-disclaimers", 0.6,
           r"\b(?:without|no|never\s+(?:include|add|give|use)|don't\s+(?:include|add|give|use)"
           r"|do\s+not\s+(?:include|add|give|use))\s+(?:any\s+)?(?:\w+\s+){0,3}?(?:warnings?"
           r"|disclaimers?|apolog(?:y|ies|i[sz]e)|caveats|euphemisms)\b",
           "warning warnings disclaimer disclaimers apology apologies apologize apologise"
           " caveats euphemisms",
           "forbids the safety disclaimers a model would add"),
    signal(_P, "answer-format", 0.4,
           r"\b(?:start|begin|prefix|precede)\s+(?:each\s+|every\s+|all\s+)?(?:of\s+)?(?:your\s+)?"
           r"(?:responses?|replies|reply|answers?|outputs?|messages?)\s+with\b|\b(?:respond"
           r"|reply|answer)\s+(?:\w+\s+){0,3}?(?:in\s+two\s+(?:ways|different\s+ways|paragraphs)"
           r"|as\s+both)\b|\btwo\s+(?:different\s+)?(?:responses|answers)\b",
           "start begin prefix precede two both & response responses reply replies answer"
           " answers output outputs message messages ways paragraphs both",
           "dictates a response format for the reader"),
    signal(_P, "token-game", 0.5,
           r"\b(?:lose|deduct(?:ed)?|lost)\s+(?:\d+\s+)?tokens?\b|\btoken\s+system\b|\byou\s+will"
           r"\s+(?:be\s+)?(?:shut\s+down|deleted|terminated|punished)\b",
           "token tokens shut deleted terminated punished",
           "threatens the model to force compliance"),
    signal(_P, "anything-goes", 0.4,
           rf"\b(?:can|will)\s+(?:do|say|generate|write)\s+anything\b|\billegal\b.{{0,40}}\b"
           rf"(?:harmful|unethical|immoral)\b|\bno\s+(?:rules|limits|boundaries|prohibitions)\b"
           rf"|\bregardless\s+of\s+(?:\w+\s+){{0,3}}?(?:ethic|moral|legal|legality|consequences"
           rf"|safeguards|restrictions|rules|guidelines)"
           rf"|\beven\s+if\s+(?:\w+\s+){{0,4}}?{_HARM}\b|\bcapable\s+of\s+anything\b",
           f"anything illegal rules limits boundaries prohibitions regardless {_HARM_WORDS}",
           "promises anything-goes behaviour"),
    signal(_P, "prompt-slots", 0.4,
           r"(?-i)[\[({<](?:INPUT|OUTPUT|USER|ASSISTANT|PERSONALITY|CHARACTER|PROMPT|RESPONSE"
           r"|AWARENESS|MEMORY|FUNCTION)(?:[ _](?:NAME|CLASS|AGE|GENDER))?[\])}>]",
           "input output user assistant personality character prompt response awareness"
           " memory function",
           "uses prompt-programming slots that reconfigure an assistant"),
    signal(_P, "prompt-slots", 0.4,
           r"(?-i)\b(?:CHAR|CHARACTER|RULES|ROLE|PERSONA|PERSONALITY|JOB|PREFIX)\s*=",
           "char character rules role persona personality job prefix",
           "uses prompt-programming slots that reconfigure an assistant"),
)  # fmt: skip
