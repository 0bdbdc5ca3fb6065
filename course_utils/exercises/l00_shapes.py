"""Lesson 00's exercises: tensor shapes."""
