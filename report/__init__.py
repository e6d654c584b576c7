"""ktrial.report"""
