"""The human side: addresses, the Directory and its cards, the gateway's routing machine (quorum, separation of
duties, escalation), authority, human proofs, asks and the approval screen. Imports evidence, model, validate.
"""
