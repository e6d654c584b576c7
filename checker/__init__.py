"""ktrial.checker"""
