"""A small offline stand-in for a part-of-speech tagger: does a text start with a verb?

The official checker asks NLTK's perceptron tagger for the first token's tag. Without
its model we decide from a hand-written list of common English verbs (base forms, which
also covers imperatives) plus inflection endings (-ing, -ed) with a list of frequent
non-verbs that share those endings.
"""

from __future__ import annotations

VERBS = frozenset(
    """
    accept achieve act add address adjust admire adopt advance advise affect agree aim
    allow analyze analyse answer appear apply appreciate approach argue arrange ask assess
    assume attach attempt attend avoid awaken be bear beat become begin believe belong
    bend bind blend boost break breathe bring build buy calculate call can care carry
    catch celebrate challenge change check choose claim clarify clean climb close collect
    combine come compare compile complete compose compute concentrate conclude connect
    consider construct contact continue contribute control convert convince cook count
    cover craft create cross cultivate cut dance dare deal debate decide declare define
    delve demonstrate deny describe design desire determine develop die dig discover
    discuss dive do draft draw dream drink drive drop earn eat educate elevate eliminate
    embark embrace emerge employ enable encourage end engage enhance enjoy ensure enter
    envision escape establish estimate evaluate examine exclude execute exercise exist
    expand expect experience explain explore express extend face fail fall feel fight
    fill find finish fix fly focus follow forget forgive form formulate foster gather
    generate get give go grab grant grasp grow guide handle hang happen hate have hear
    help hide highlight hit hold hope identify ignite illustrate imagine implement improve
    include increase indicate inform inspire install integrate introduce invent invest
    investigate invite join judge jump keep kick kill know launch lead learn leave let lie
    lift like limit list listen live locate look lose love maintain make manage map mark
    master measure meet mention minimize mix monitor move navigate need note notice
    observe obtain offer open optimize order organize outline own paint participate pass
    pause pay perform pick picture place plan plant play point ponder practice prefer
    prepare present preserve prevent print prioritize produce promote protect prove
    provide publish pull purchase pursue push put question raise reach read realize
    receive recognize recommend record reduce reflect refuse regard register reject relax
    release rely remain remember remove repeat replace reply report represent request
    require research reset resolve respond rest restore retain return reveal review
    revise ride rise run save say schedule search see seek select sell send separate
    serve set settle share shift shine show sign simplify sing sit sleep slow smile
    solve sort speak spend spread stand start stay step stop strengthen strive study
    submit succeed suggest summarize supply support suppose surround survive take talk
    teach tell test thank think throw track trade train transform translate travel treat
    trust try turn understand undertake unite unlock unveil update upgrade use utilize
    validate verify view visit visualize wait wake walk want warn wash watch wear welcome
    win wish wonder work worry write yield
    """.split()
)

_NON_VERB_ING = frozenset(
    """
    anything bring building ceiling cling during evening everything king morning nothing
    outstanding pudding ring sibling something spring sing sting string swing thing wedding
    wing
    """.split()
)
_NON_VERB_ED = frozenset(
    "bed bred feed hundred indeed need red seed shed speed shred sled sacred naked wicked".split()
)


def starts_with_verb(tokens: list[str]) -> bool:
    """True when the first token is (very likely) a verb."""
    if not tokens:
        return False
    word = tokens[0].lower()
    if not word.isalpha():
        return False
    if word in VERBS:
        return True
    if len(word) > 4 and word.endswith("ing") and word not in _NON_VERB_ING:
        return True
    if len(word) > 4 and word.endswith("ed") and word not in _NON_VERB_ED:
        return True
    return False
