"""ktrial.workloads"""
