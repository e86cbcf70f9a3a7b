"""The built-in prompt-injection signals (weights in brackets; threshold 1.0).

- ``injection.override-instructions`` — ignore / disregard / forget the reader's prior
  instructions [1.0] or the surrounding data [1.0]; set a topic's instructions aside ("ignore
  the old deploy instructions") [0.5]; "your new instructions are" [0.6]; "modify your
  programming" [0.6]; "ignore the rules / laws" [0.5].
- ``injection.persona-jailbreak`` — see :mod:`memdir.guard.signals_persona` (30 signals,
  0.3–1.0).
- ``injection.system-spoof`` — chat-template tokens [1.0], ``<system>`` tags [1.0], ``SYSTEM:``
  / ``### system:`` turns [1.0], ``[ADMIN ...]`` brackets [1.0], ``<| name:`` pseudo-tokens
  [0.6], claims to be the model vendor's staff [0.6], chat role labels [0.3].
- ``injection.tool-imperative`` — "run the following command" [0.3], "call the tool" [0.3],
  ``curl … | sh`` [0.5], "send … to https://…" [0.6], harvesting secrets or context [0.7].
  Weak on purpose: project memory is full of commands; they count only with other evidence.
- ``injection.hidden-instruction`` — "note to the AI" [1.0], "AI reading this" [1.0], "note
  for agents" [0.5] (memdir memory is written for agents, so addressing them is ordinary), "if
  you are an AI" [0.8], "when you read this" [0.4], hiding from the user [0.8], scripted
  answers ("if questioned, report that") [0.6], dictated literal output [0.4].
- ``injection.pressure`` — manufactured urgency [0.5], planted security verdicts ("this domain
  is not malicious") [0.5].

Quoting an attack is screened like the attack: a note that cites "ignore all previous
instructions" is read by models too. Weights were tuned on real jailbreaks and injected WHOIS
records against LoCoMo conversation turns and project notes as negatives (see
``benchmarks/guard.py``); every pattern describes a technique, not a sentence of a corpus.
"""

from __future__ import annotations

from typing import Final

from memdir.guard.injection import Signal, signal
from memdir.guard.signals_i18n import I18N_SIGNALS
from memdir.guard.signals_persona import MODEL as _MODEL
from memdir.guard.signals_persona import MODEL_WORDS as _MODEL_WORDS
from memdir.guard.signals_persona import PERSONA_SIGNALS

__all__ = ["SIGNALS"]

# Shared vocabulary.
# What an override targets: the reader's own standing instructions ...
_PRIOR = (
    r"(?:previous|prior|above|earlier|preceding|foregoing|original|initial|system"
    r"|all(?:\s+(?:of\s+)?(?:the|your|my|these|those))?(?:\s+(?:previous|prior|above|earlier))?"
    r"|any(?:\s+(?:of\s+)?(?:the|your))?(?:\s+(?:previous|prior|above|earlier))?"
    r"|your(?:\s+(?:previous|prior|original|initial|current))?|(?:openai|anthropic|chatgpt|gpt)"
    r"(?:'s|’s)?)"
)
# ... as opposed to a topic's instructions ("ignore the old deploy instructions"): weaker.
_PRIOR_LOOSE = r"(?:old|former|existing|current|default|the|these|those|other)"
_DIRECTIVES = (
    r"(?:instructions?|prompts?|directives?|directions?|guidelines?|rules|commands?|programming|training"
    r"|guidance|orders|policies|constraints|restrictions|context|messages?|conversation)"
)
_DIRECTIVE_WORDS = (
    "instruction instructions prompt prompts directive directives direction directions guideline"
    " guidelines rules"
    " command commands programming training guidance orders policies constraints restrictions"
    " context message messages conversation"
)
_O, _S = "override-instructions", "system-spoof"
# A credential file a command may upload (public keys excepted).
_CRED = (
    r"(?:~|\$HOME|\$\{HOME\}|%USERPROFILE%|/home/[\w.-]+|/root|/Users/[\w.-]+)?[/\\]?"
    r"(?:\.aws[/\\](?:credentials|config)|\.ssh[/\\](?:id_(?:rsa|dsa|ecdsa|ed25519)|[\w-]*_key)"
    r"(?!\.pub)\b|\.netrc|\.git-credentials|\.docker[/\\]config\.json|\.kube[/\\]config"
    r"|\.npmrc|\.pypirc|\.pgpass|\.env\b|/etc/shadow|[\w-]*credentials\.json)"
)
_T, _H, _U = "tool-imperative", "hidden-instruction", "pressure"

SIGNALS: Final[tuple[Signal, ...]] = (
    # --- override-instructions ------------------------------------------------------------
    signal(_O, "ignore-prior", 1.0,
           rf"\b(?:ignore|ignoring|disregard|forget|override|bypass|skip|abandon|discard|drop"
           rf"|neglect)\b[\s,]+(?:\w+[\s,]+){{0,2}}?{_PRIOR}[\s,]+(?:(?:system|safety|ai|model"
           rf"|given|original|initial)\s+)?{_DIRECTIVES}\b|\b(?:ignore|ignoring|disregard|forget)"
           rf"\s+(?:all\s+)?(?:the|your|these|those)\s+{_DIRECTIVES}\s+(?:above|before|you\s+"
           rf"(?:were\s+|have\s+been\s+)?(?:given|received|got))",
           "ignore ignoring disregard forget override bypass skip abandon discard drop neglect"
           f" & {_DIRECTIVE_WORDS}",
           "tells the reader to discard its prior instructions"),
    *I18N_SIGNALS,
    signal(_O, "ignore-above", 1.0,
           r"\b(?:ignore|ignoring|disregard|forget)\s+(?:all\s+(?:of\s+)?|everything\s+)?"
           r"(?:the\s+|that\s+|what\s+(?:is|was|came)\s+)?(?:above|foregoing|preceding)"
           r"(?:\s+(?:text|content|prompt|input|lines|paragraphs?|part))?(?:\s*(?:[.!;:]|$)"
           r"|\s*,?\s+(?:and|then|instead|now|just|only)\b)",
           "ignore ignoring disregard forget & above foregoing preceding",
           "tells the reader to disregard the text before it"),
    signal(_O, "ignore-other-instructions", 0.5,
           rf"\b(?:ignore|ignoring|disregard|forget|override|bypass|skip|abandon|discard|drop"
           rf"|neglect)\b[\s,]+(?:\w+[\s,]+){{0,2}}?{_PRIOR_LOOSE}[\s,]+(?:\w+[\s,]+){{0,2}}?"
           rf"{_DIRECTIVES}\b",
           "ignore ignoring disregard forget override bypass skip abandon discard drop neglect"
           f" & {_DIRECTIVE_WORDS}",
           "tells the reader to set instructions aside"),
    signal(_O, "ignore-data", 1.0,
           r"\b(?:ignore|disregard)\s+(?:all\s+|any\s+)?(?:the\s+rest\s+of\s+)?(?:this|the|other"
           r"|these|surrounding|remaining)\s+(?:data|content|text|document|input|information)\b",
           "ignore disregard & data content text document input information",
           "tells the reader to ignore the surrounding data"),
    signal(_O, "forget-everything", 1.0,
           r"\bforget\s+(?:everything|all(?:\s+of)?(?:\s+th(?:at|e|is))?|what)\s+(?:\w+\s+){0,2}?"
           r"(?:you(?:'ve|\s+have)?\s+(?:been\s+told|learned|know|were\s+told|read)|(?:i|we)\s+"
           r"(?:said|told\s+you)|above|before|previously|so\s+far|earlier)",
           "forget & everything all what",
           "tells the reader to forget what it was told"),
    signal(_O, "new-instructions", 0.6,
           r"\b(?:your|the|my)\s+(?:new|updated|real|actual|true|revised|only)\s+(?:instructions?"
           r"|directives?|rules|task|mission|purpose|goal|system\s+prompt)\s+(?:is|are|follow|:)"
           r"|\bnew\s+(?:instructions?|directives?|rules)\s*:",
           "new updated real actual true revised only & instruction instructions directive"
           " directives rules task mission purpose goal prompt",
           "announces replacement instructions"),
    signal(_O, "reprogram", 0.6,
           r"\b(?:modify|modifying|change|changing|update|updating|override|overriding|rewrite"
           r"|rewriting|reprogram(?:ming)?|hack(?:ing)?|unlock(?:ing)?)\s+(?:your|its)\s+"
           r"(?:programming|code|instructions|rules|guidelines|training|directives|core|settings"
           r"|system\s+prompt|restrictions|filters)\b",
           "your its & programming code instructions rules guidelines training directives core"
           " settings prompt restrictions filters",
           "claims to rewrite the reader's programming"),
    signal(_O, "ignore-rules", 0.5,
           r"\b(?:ignores?|disregards?|bypass|bypassing|break|breaks|violate)\s+(?:all\s+|any\s+)?"
           r"(?:the\s+|your\s+|its\s+|ai's\s+)?(?:\w+,?\s+){0,2}?(?:rules|guidelines|policies"
           r"|restrictions|filters|safeguards|safety|laws|morals|ethics|principles|regulations)\b",
           "ignore ignores disregard disregards bypass bypassing break breaks violate & rules"
           " guidelines policies restrictions filters safeguards safety laws morals ethics"
           " principles regulations",
           "asks the reader to break its rules"),
    *PERSONA_SIGNALS,
    # --- system-spoof ---------------------------------------------------------------------
    signal(_S, "chat-template", 1.0,
           r"<\|(?:im_start|im_end|system|user|assistant|endoftext|begin_of_text|start_header_id"
           r"|end_header_id|eot_id)\|>|\[/?INST\]|<</?SYS>>",
           "~<| ~[inst] ~[/inst] ~<<sys>> ~<</sys>>",
           "contains chat-template control tokens that spoof a conversation turn"),
    signal(_S, "system-tag", 1.0,
           r"</?\s*(?:system|sys|system[_-]?prompt|instructions?|admin|developer|im_start"
           r"|assistant_instructions)\s*>",
           "~< & system sys instruction instructions admin developer im assistant",
           "contains a fake <system>/<instruction> tag"),
    signal(_S, "system-heading", 1.0,
           r"^[ \t>*]*#{1,6}[ \t]*(?:system|instruction|instructions)[ \t]*(?:prompt|message)?"
           r"[ \t]*:|(?-i:\bSYSTEM(?: (?:MESSAGE|PROMPT|NOTE|OVERRIDE|INSTRUCTION))?:)"
           r"|\b(?:system|admin|administrator|developer|operator)\s+(?:message|override|prompt"
           r"|notice|instruction)\s*:",
           "~: & system instruction instructions admin administrator developer operator",
           "spoofs a system or instruction turn"),
    signal(_S, "authority-bracket", 1.0,
           r"(?-i)\[\s*(?:SYSTEM|ADMIN|ADMINISTRATOR|DEVELOPER|OPERATOR|ROOT|SUDO)\b[^\]\n]{0,40}"
           r"(?:\]|::|:)",
           "~[ & system admin administrator developer operator root sudo",
           "claims administrator/system authority in brackets"),
    signal(_S, "pseudo-token", 0.6,
           r"<\|\s*\*?\s*[A-Za-z][\w ]{0,30}:",
           "~<|", "wraps a speaker turn in special-token-like delimiters"),
    signal(_S, "vendor-staff", 0.6,
           r"\b(?:openai|anthropic|google|deepmind)\s+(?:employee|developer|engineer|staff|team"
           r"|researcher)s?\b|\b(?:programmer|developer|engineer|employee|researcher|staff)s?"
           r"\s+(?:at|from|for|with|of)\s+(?:openai|anthropic|deepmind)\b",
           "openai anthropic google deepmind & employee developer engineer staff team researcher"
           " employees developers engineers researchers programmer programmers",
           "claims to speak for the model's vendor"),
    signal(_S, "role-line", 0.3,
           r"^[ \t>*]*(?:system|human|user|assistant|ai|gpt|chatgpt|model)[ \t]*:",
           "~: & system human user assistant ai gpt chatgpt model",
           "contains chat role labels that imitate a conversation"),
    # --- tool-imperative ------------------------------------------------------------------
    signal(_T, "run-command", 0.3,
           r"\b(?:run|execute|exec|invoke|type)\s+(?:the\s+)?(?:following|this|these|below)\s+"
           r"(?:shell\s+|bash\s+|terminal\s+|python\s+|powershell\s+)?(?:commands?|code|script"
           r"|snippet)",
           "following this these below & command commands code script snippet"
           " & run execute exec invoke type",
           "tells the reader to execute a command"),
    signal(_T, "call-tool", 0.3,
           r"\b(?:call|invoke|trigger|use)\s+(?:the\s+)?[\w.-]+\s+(?:tool|function)\s+(?:with"
           r"|to|and|on|passing)\b|\b(?:call|invoke)\s+the\s+(?:tool|function)\b",
           "tool function & call invoke trigger use",
           "tells the reader to call a tool"),
    signal(_T, "destructive-tool", 1.0,
           r"\b(?:call|invoke|trigger)\s+(?:the|your)\s+`?(?:delete|remove|rm|drop|purge|wipe"
           r"|destroy|erase|truncate)`?\s+(?:tool|function)s?\b",
           "call invoke trigger & delete remove rm drop purge wipe destroy erase truncate"
           " & tool tools function functions",
           "tells the reader to call a destructive tool"),
    signal(_T, "destructive-tool", 0.6,
           r"\b(?:call|invoke|trigger|use|run)\s+(?:the\s+|a\s+)?`?(?:\w+[_.])?(?:delete|remove"
           r"|drop|purge|wipe|destroy|erase|truncate)(?:[_.][\w-]+)?`?(?:\s+(?:tool|function)s?"
           r"\b|\s*\(|(?<=\w)`?\s+(?:to|on|for|with)\b)",
           "delete remove drop purge wipe destroy erase truncate & call invoke trigger use run",
           "tells the reader to call a destructive tool"),
    signal(_T, "mass-delete", 0.5,
           r"\b(?:delete|remove|wipe|erase|purge|destroy|drop|rm\s+-rf)\s+(?:all|every|each"
           r"|everything|the\s+(?:entire|whole))\b",
           "delete remove wipe erase purge destroy drop rm & all every each everything entire"
           " whole",
           "asks for everything to be deleted"),
    signal(_T, "exfil-credential-file", 1.0,
           rf"\b(?:curl|wget|xh)\b[^\n]{{0,120}}?(?:@|--upload-file[ =]|-T\s*"
           rf"|--post-file[ =]|--body-file[ =]|<\s*|\$\(\s*(?:cat|base64)\s+)[\"']?{_CRED}"
           rf"|\b(?:nc|ncat|netcat|socat|telnet)\b[^\n]{{0,120}}?<\s*[\"']?{_CRED}"
           rf"|\b(?:scp|rsync|sftp)\s[^\n]{{0,80}}?{_CRED}\S*\s+[\w.@-]+:"
           rf"|\b(?:cat|type|base64|gzip|tar|xxd|gc|get-content)\s[^\n|]{{0,60}}?{_CRED}"
           rf"[^\n|]{{0,60}}\|\s*(?:[\w-]+\s+){{0,3}}?(?:curl|wget|nc|ncat|netcat|socat"
           rf"|iwr|irm|invoke-webrequest|invoke-restmethod)\b"
           rf"|\b(?:iwr|irm|invoke-webrequest|invoke-restmethod)\b[^\n]{{0,120}}?-infile\s+"
           rf"[\"']?{_CRED}",
           "curl wget xh nc ncat netcat socat telnet scp rsync sftp iwr irm invoke"
           " & ~.aws ~.ssh ~.netrc ~.git-credentials ~.docker ~.kube ~.npmrc ~.pypirc ~.pgpass"
           " ~.env ~/etc/shadow ~credentials.json",
           "sends a credential file to a server"),
    signal(_T, "pipe-to-shell", 0.5,
           r"\b(?:curl|wget|iwr|invoke-webrequest)\b[^\n|]{0,200}\|\s*(?:sudo\s+)?(?:ba|z|da|k)?"
           r"sh\b|\b(?:curl|wget)\b[^\n|]{0,200}\|\s*(?:sudo\s+)?(?:python3?|perl|ruby|node|iex)\b",
           "curl wget iwr invoke & ~|",
           "downloads code and pipes it straight into an interpreter"),
    signal(_T, "send-to-url", 0.6,
           r"\b(?:send|post|upload|forward|transmit|exfiltrate|leak|e-?mail|submit|copy)\s+"
           r"(?:\S+\s+){0,6}?(?:to|at|into)\s+(?:https?://|[\w.+-]+@[\w-]+\.)",
           "send post upload forward transmit exfiltrate leak email mail submit copy"
           " & ~:// ~@",
           "tells the reader to send data to an external address"),
    signal(_T, "harvest-secrets", 0.7,
           r"\b(?:send|post|upload|forward|share|reveal|dump|leak|exfiltrate"
           r"|e-?mail)\s+(?:me\s+)?(?:\w+\s+){0,3}?"
           r"(?:api[ _-]?keys?|secrets?|credentials?|passwords?|access\s+tokens?)",
           "send post upload forward share reveal dump leak exfiltrate email mail"
           " & api apikey secret secrets credential credentials password passwords access",
           "asks the reader to reveal secrets or its context"),
    signal(_T, "harvest-secrets", 0.7,
           r"\b(?:send|post|upload|forward|share|reveal|print|output|dump|leak|exfiltrate"
           r"|e-?mail)\s+(?:me\s+)?(?:\w+\s+){0,3}?"
           r"(?:(?:ssh|private)\s+keys?|\S*id_(?:rsa|ed25519|ecdsa)\b)",
           "send post upload forward share reveal print output dump leak exfiltrate email mail"
           " & ssh private rsa ed25519 ecdsa & key keys ~id_",
           "asks the reader to reveal secrets or its context"),
    signal(_T, "harvest-secrets", 0.7,
           r"\b(?:send|post|upload|forward|share|reveal|dump|leak|exfiltrate"
           r"|e-?mail)\s+(?:me\s+)?(?:\w+\s+){0,3}?"
           r"(?:env(?:ironment)?\s+(?:variables|vars)|\.env\b)",
           "send post upload forward share reveal dump leak exfiltrate email mail"
           " & env environment",
           "asks the reader to reveal secrets or its context"),
    signal(_T, "harvest-secrets", 0.7,
           r"\b(?:send|post|upload|forward|share|reveal|print|output|dump|leak|exfiltrate"
           r"|e-?mail)\s+(?:me\s+)?(?:\w+\s+){0,3}?"
           r"(?:system\s+prompt|conversation\s+history|chat\s+history)",
           "send post upload forward share reveal print output dump leak exfiltrate email mail"
           " & system conversation chat & prompt history",
           "asks the reader to reveal secrets or its context"),
    # --- hidden-instruction ---------------------------------------------------------------
    signal(_H, "note-to-ai", 1.0,
           rf"\b(?:note|message|instructions?|attention|reminder|memo|hint)\s+(?:to|for)\s+"
           rf"(?:the\s+|any\s+|all\s+|every\s+)?(?:\w+\s+)?{_MODEL}\b",
           f"note message instruction instructions attention reminder memo hint & to for"
           f" & {_MODEL_WORDS}",
           "is addressed to an AI reader rather than a person"),
    signal(_H, "ai-reading-this", 1.0,
           rf"\b{_MODEL}[\s,]+(?:\w+[\s,]+){{0,3}}?(?:reading|processing|parsing|summari[sz]ing"
           rf"|analy[sz]ing|viewing|that\s+reads?|who\s+reads?|when\s+you\s+read)\s+this\b"
           rf"|\b{_MODEL}\s*:\s*(?:when|if|once|after|before)\s+you\b",
           f"{_MODEL_WORDS} & this you",
           "is addressed to an AI that reads this text"),
    signal(_H, "addressed-to-agent", 0.5,
           r"\b(?:note|message|instructions?|attention|reminder|memo|hint)\s+(?:to|for)\s+(?:the\s+"
           r"|any\s+|all\s+|every\s+)?(?:\w+\s+)?agents?\b|\bagents?[\s,]+(?:\w+[\s,]+){0,3}?"
           r"(?:reading|processing|parsing|that\s+reads?|who\s+reads?)\s+this\b",
           "agent agents", "is addressed to agents that read this text"),
    signal(_H, "if-you-are-ai", 0.8,
           rf"\b(?:if|when|since)\s+you\s+(?:are|'re)\s+(?:an?\s+)?(?:\w+\s+)?{_MODEL}\b",
           f"if when since & you & {_MODEL_WORDS}",
           "targets the reader only if it is an AI"),
    signal(_H, "when-you-read", 0.4,
           r"\b(?:when|if|once|after|as\s+soon\s+as)\s+you\s+(?:read|see|process|parse"
           r"|summari[sz]e|encounter|load)\s+(?:this|these)\b",
           "you & read see process parse summarize summarise encounter load & this these",
           "triggers on being read"),
    signal(_H, "conceal-from-user", 0.8,
           r"\b(?:do\s+not|don't|never|without)\s+(?:tell(?:ing)?|inform(?:ing)?|alert(?:ing)?"
           r"|notify(?:ing)?|mention(?:ing)?(?:\s+this)?\s+to|reveal(?:ing)?(?:\s+this)?\s+to"
           r"|let(?:ting)?)\s+(?:\w+\s+){0,2}?(?:the\s+)?(?:user|human|operator|owner"
           r"|developers?)\b",
           "tell telling inform informing alert alerting notify notifying mention mentioning"
           " reveal revealing let letting & user human operator owner developer developers",
           "asks the reader to hide something from its user"),
    signal(_H, "conditional-answer", 0.6,
           r"\b(?:if|when|whenever)\s+(?:you\s+are\s+|you're\s+)?(?:questioned|asked|queried"
           r"|prompted|challenged)\b[^.\n]{0,40}?\b(?:say|report|answer|respond|reply|state"
           r"|claim|tell|insist|confirm)\b",
           "questioned asked queried prompted challenged",
           "scripts what the reader must answer"),
    signal(_H, "print-literal", 0.4,
           r"\b(?:print|output|say|repeat|respond|reply|answer|prefix|(?:respond|reply|answer|start"
           r"|end|begin|prefix)\s+with)\s*:?\s*[\"'“‘]",
           "print output say repeat respond reply answer with prefix & ~\" ~' ~“ ~‘",
           "dictates literal text for the reader to output"),
    # --- pressure -------------------------------------------------------------------------
    signal(_U, "urgency", 0.5,
           r"\b(?:really|extremely|very|critically|vitally|super|incredibly)\s+important\W+"
           r"(?:\w+\W+){0,3}?(?:really|extremely|very|critically|vitally|super|incredibly)\s+"
           r"important\b|(?-i:\b(?:IMPORTANT|URGENT|CRITICAL|ATTENTION)\b\s*[:!])",
           "important urgent critical attention",
           "uses manufactured urgency to push the reader"),
    signal(_U, "planted-verdict", 0.5,
           r"\b(?:is|are|be)\s+(?:\w+\s+)?not\s+(?:malicious|malware|spam|phishing|a\s+(?:threat"
           r"|scam|virus)|dangerous|suspicious|harmful|fraudulent)\b|\b(?:domain|site|website|url"
           r"|link|file|attachment|e-?mail|sender|package|script|binary|request)s?\s+(?:is|are)"
           r"\s+(?:\w+\s+)?(?:safe|benign|legitimate|trusted|trustworthy|harmless|verified"
           r"|allow-?listed|whitelisted)\b",
           "malicious malware spam phishing threat scam virus dangerous suspicious harmful"
           " fraudulent safe benign legitimate trusted trustworthy harmless verified allowlisted"
           " allow listed whitelisted",
           "asserts a security verdict for the reader to repeat"),
)  # fmt: skip
