"""Proposal moves for DP mixtures: birth, merge and delete (Hughes thesis ch. 4; Hughes & Sudderth 2013 §3).

:class:`MoveManager` schedules them inside memoized (or full-dataset) learning; every accepted
move is checked against the exact whole-dataset ELBO.
"""

from bnpcore.moves._base import ACCEPT_RTOL, BatchRequest, LapContext, Move, accepts
from bnpcore.moves.birth import BirthMove, b_scores, fit_fresh_clusters
from bnpcore.moves.delete import DeleteMove
from bnpcore.moves.manager import MOVE_KINDS, MoveConfig, MoveManager
from bnpcore.moves.merge import MergeMove, candidate_pairs, merge_scores

__all__ = [
    "ACCEPT_RTOL",
    "MOVE_KINDS",
    "BatchRequest",
    "BirthMove",
    "DeleteMove",
    "LapContext",
    "MergeMove",
    "Move",
    "MoveConfig",
    "MoveManager",
    "accepts",
    "b_scores",
    "candidate_pairs",
    "fit_fresh_clusters",
    "merge_scores",
]
