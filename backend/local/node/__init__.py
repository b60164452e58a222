"""The embedded cluster's nodes: a kubelet per Node object (kubelet.py), whose pods are processes
on this machine, reporting their status through the in-process client like any kubelet."""
