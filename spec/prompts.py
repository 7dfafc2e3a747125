"""Prompt sets for self-distillation and evaluation, made offline by our own code.

The drafter heads learn from the target's answers to these prompts, and the benchmark measures accept
length on the held-out ones, so two things matter more than anything else:

* determinism: a seed gives the same prompts, in the same order, on every machine (the stdlib-derived
  code and chat prompts follow the running Python's own docstrings, so they are pinned per Python
  version);
* an honest split: a prompt's side (train / held-out) is a pure function of its text, decided by
  hashing a *normalised* form in which names, props, frames and "show your reasoning" phrases are
  dropped, and a prompt about a named stdlib object (`textwrap.dedent`) is keyed by that name alone.
  Near-duplicates (same problem, other name or object; same task, other framing) therefore always
  land on the same side, and generating more train prompts never moves a held-out one.

Three domains, each a weighted mix of "kinds" (a template family or a source of documentation):
math (GSM8K-style word problems), code (classic small tasks, stdlib functions, code reading) and chat
(explanations, advice, how-tos, stories, emails, Python documentation).

    python -m spec.prompts --out runs/prompts --n 2000       # train/ and heldout/ jsonl per domain
    python -m spec.prompts --demo --out assets/prompts       # the demo / bench example prompts
"""

from __future__ import annotations

import argparse
import builtins
import hashlib
import importlib
import inspect
import json
import keyword
import math
import random
import re
import sys
import warnings
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

DOMAINS = ("math", "code", "chat")
HELDOUT_PER_MILLE = 100  # 10% of normalised keys are held out
SPLIT_SALT = "spec-arena/prompts/v1"  # changing it reshuffles every split: never do so silently
DEFAULT_HELDOUT = 200
DEMO_SIZE = 10


# ----------------------------------------------------------------------------------------------
# Shared vocabulary. Words used as *filler* (they vary without changing the task) are also what
# the split normaliser drops, so near-duplicates share one key. Adding a filler word can move an
# existing prompt that contains it to the other side: add words that our prompts don't use yet.
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Person:
    name: str
    he: str  # subject pronoun
    him: str
    his: str

    @property
    def He(self) -> str:
        return self.he.capitalize()


def _people(spec: str, he: str, him: str, his: str) -> list[_Person]:
    return [_Person(n, he, him, his) for n in spec.split()]


_PEOPLE = _people(
    "Tom Liam Noah Lucas Ethan Omar Ravi Mateo Kenji Chen Kwame Diego Hassan Ben Leo Oscar Felix Ivan "
    "Carlos Tariq Jonas Malik Victor Arjun Ahmed Kofi Pedro Daniel Samuel Marco",
    "he", "him", "his",
) + _people(
    "Mia Emma Olivia Ava Sofia Zoe Aisha Priya Lucia Yuki Mei Amara Elena Fatima Lily Chloe Nina "
    "Hannah Maya Ana Leila Freya Nadia Anika Sara Zara Ines Julia Clara Emily",
    "she", "her", "her",
)
_PRONOUNS = "he she him her his hers they them their".split()

# (singular, plural) countable things for word problems
_ITEMS = [
    ("apple", "apples"), ("orange", "oranges"), ("pencil", "pencils"), ("sticker", "stickers"),
    ("marble", "marbles"), ("cookie", "cookies"), ("book", "books"), ("seashell", "seashells"),
    ("stamp", "stamps"), ("cupcake", "cupcakes"), ("balloon", "balloons"), ("crayon", "crayons"),
    ("toy car", "toy cars"), ("baseball card", "baseball cards"), ("bead", "beads"),
    ("button", "buttons"), ("candy", "candies"), ("egg", "eggs"), ("flower", "flowers"),
    ("postcard", "postcards"), ("muffin", "muffins"), ("notebook", "notebooks"), ("eraser", "erasers"),
    ("kite", "kites"), ("comic book", "comic books"), ("strawberry", "strawberries"),
    ("paper crane", "paper cranes"), ("puzzle piece", "puzzle pieces"), ("ribbon", "ribbons"),
    ("trading card", "trading cards"),
]
_CHEAP = [  # plausible at $1-$25
    ("notebook", "notebooks"), ("sandwich", "sandwiches"), ("pen set", "pen sets"),
    ("movie ticket", "movie tickets"), ("bag of chips", "bags of chips"), ("mug", "mugs"),
    ("paperback", "paperbacks"), ("smoothie", "smoothies"), ("sketchbook", "sketchbooks"),
    ("bus pass", "bus passes"), ("plant pot", "plant pots"), ("phone case", "phone cases"),
]
_PRICEY = [  # plausible at $20-$300
    "jacket", "pair of shoes", "backpack", "video game", "desk lamp", "board game", "watch",
    "suitcase", "desk chair", "tennis racket", "bicycle helmet", "pair of headphones", "coffee maker",
]
_CONTAINERS = ["boxes", "bags", "crates", "baskets", "packs", "jars", "trays", "bins", "cartons"]
_BAKED = ["loaves of bread", "muffins", "bagels", "croissants", "pies", "cakes", "pretzels", "buns"]
_EXPENSES = ["food", "bus fares", "snacks", "books", "music lessons", "phone bills", "gym fees"]
_PLACES = ["school", "library", "sports club", "summer camp", "art class", "music school"]

_MATH_ASKS = [
    "Explain your reasoning step by step.",
    "Show your work, then give the final answer.",
    "Think step by step and give the final answer at the end.",
    "Solve it step by step.",
    "Walk through the solution and state the answer clearly.",
    "Explain each step of your reasoning.",
]
_MATH_OPENERS = ["", "", "", "Solve this word problem. ", "Math question: ", "Here is a problem. "]


# ----------------------------------------------------------------------------------------------
# Math: each template draws its numbers from `r` only (never from the cast), so the same rng state
# with another cast gives the same problem with other names: a near-duplicate, by construction.
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Cast:
    p: _Person
    q: _Person
    s: _Person
    item: tuple[str, str]
    cheap: tuple[str, str]
    pricey: str
    box: str
    baked: str
    expense: str
    place: str


def _draw_cast(r: random.Random) -> _Cast:
    p, q, s = r.sample(_PEOPLE, 3)
    return _Cast(p, q, s, r.choice(_ITEMS), r.choice(_CHEAP), r.choice(_PRICEY), r.choice(_CONTAINERS),
                 r.choice(_BAKED), r.choice(_EXPENSES), r.choice(_PLACES))


def _money(x: Fraction | int) -> str:
    x = Fraction(x)
    return f"${x.numerator // x.denominator}" if x.denominator == 1 else f"${float(x):.2f}"


def _pl(n: int, word: str, plural: str | None = None) -> str:
    """'1 hour', '3 hours'."""
    return f"{n} {word}" if n == 1 else f"{n} {plural or word + 's'}"


def _num(x: Fraction | int) -> str:
    x = Fraction(x)
    return str(x.numerator) if x.denominator == 1 else f"{float(x):g}"


_MathTemplate = Callable[[random.Random, _Cast], "tuple[str, Fraction]"]
_MATH: dict[str, _MathTemplate] = {}


def _math(fn: _MathTemplate) -> _MathTemplate:
    _MATH[fn.__name__] = fn
    return fn


@_math
def add_more(r, c):
    a, b = r.randint(5, 80), r.randint(2, 50)
    i = c.item[1]
    return f"{c.p.name} has {a} {i}. {c.p.He} buys {b} more at the store. How many {i} does {c.p.name} have now?", Fraction(a + b)


@_math
def give_away(r, c):
    a = r.randint(20, 150)
    b = r.randint(2, a - 5)
    i = c.item[1]
    return f"{c.p.name} had {a} {i} and gave {b} of them to {c.q.name}. How many {i} does {c.p.name} have left?", Fraction(a - b)


@_math
def three_days(r, c):
    a, b, d = (r.randint(4, 60) for _ in range(3))
    i = c.item[1]
    return (f"{c.p.name} collected {a} {i} on Monday, {b} on Tuesday and {d} on Wednesday. "
            f"How many {i} did {c.p.he} collect in all?"), Fraction(a + b + d)


@_math
def boxes(r, c):
    k, m = r.randint(3, 15), r.randint(4, 24)
    i = c.item[1]
    return f"There are {k} {c.box} with {m} {i} in each. How many {i} are there altogether?", Fraction(k * m)


@_math
def share_equally(r, c):
    k, m = r.randint(2, 9), r.randint(3, 15)
    i = c.item[1]
    return (f"{c.p.name} has {k * m} {i} and shares them equally among {k} friends. "
            f"How many {i} does each friend get?"), Fraction(m)


@_math
def buy_price(r, c):
    p, k = Fraction(r.randint(2, 50), 2), r.randint(2, 12)
    return (f"One {c.cheap[0]} costs {_money(p)}. {c.p.name} buys {k} of them. "
            f"How much money does {c.p.he} spend?"), p * k


@_math
def change_back(r, c):
    k, p = r.randint(2, 6), Fraction(r.randint(4, 36), 4)
    bill = next(b for b in (10, 20, 50, 100) if b > k * p)
    return (f"{c.p.name} buys {k} {c.cheap[1]} that cost {_money(p)} each and pays with a {_money(bill)} bill. "
            f"How much change does {c.p.he} get?"), bill - k * p


@_math
def discount(r, c):
    price, pct = 5 * r.randint(4, 60), r.choice([10, 15, 20, 25, 30, 40, 50])
    return (f"A {c.pricey} normally costs {_money(price)}. This week it is {pct}% off. "
            f"What is the sale price?"), price * Fraction(100 - pct, 100)


@_math
def percent_walk(r, c):
    pct = r.choice([5, 10, 20, 25, 30, 40, 50, 60, 75])
    total = 20 * r.randint(2, 40)
    return (f"There are {total} students at a {c.place}. {pct}% of them walk there every day. "
            f"How many students do not walk?"), total - Fraction(total * pct, 100)


@_math
def growth(r, c):
    pop, pct = 100 * r.randint(2, 60), r.choice([2, 4, 5, 10, 15, 20])
    return (f"A small town had {pop} residents last year. This year the population grew by {pct}%. "
            f"How many residents does the town have now?"), pop * Fraction(100 + pct, 100)


@_math
def tip(r, c):
    meal, pct = r.randint(20, 120), r.choice([10, 15, 18, 20])
    return (f"{c.p.name} and {c.q.name} had dinner that cost {_money(meal)}. They leave a {pct}% tip. "
            f"How much do they pay in total, including the tip?"), meal * Fraction(100 + pct, 100)


@_math
def km_to_m(r, c):
    a, d = Fraction(r.randint(3, 24), 2), r.randint(3, 14)
    return (f"{c.p.name} runs {_num(a)} kilometers every day for {d} days. "
            f"How many meters does {c.p.he} run in total?"), a * d * 1000


@_math
def movie_minutes(r, c):
    h, m = r.randint(1, 3), 5 * r.randint(1, 11)
    return f"A movie lasts {_pl(h, 'hour')} and {m} minutes. How many minutes long is the movie?", Fraction(60 * h + m)


@_math
def practice_hours(r, c):
    m = r.choice([15, 20, 30, 45, 60, 90])
    w = r.choice([w for w in range(1, 9) if (m * 7 * w) % 60 == 0] or [4])
    return (f"{c.p.name} practices the piano for {m} minutes every day. "
            f"How many hours does {c.p.he} practice in {_pl(w, 'week')}?"), Fraction(m * 7 * w, 60)


@_math
def flour_loaves(r, c):
    kg, g = r.randint(1, 10), r.choice([100, 125, 200, 250, 500])
    return (f"A bag of flour weighs {_pl(kg, 'kilogram')}. A baker uses {g} grams of flour for each loaf of bread. "
            f"How many loaves can the baker make from the bag?"), Fraction(kg * 1000, g)


@_math
def water_liters(r, c):
    k, ml = r.randint(3, 10), r.choice([200, 250, 300, 500])
    return (f"{c.p.name} drinks {k} glasses of water a day, and each glass holds {ml} milliliters. "
            f"How many liters of water does {c.p.he} drink in a week?"), Fraction(k * ml * 7, 1000)


@_math
def train_distance(r, c):
    v, t, mins = 4 * r.randint(10, 30), r.randint(1, 6), r.choice([0, 15, 30, 45])
    when = _pl(t, "hour") + ("" if mins == 0 else f" and {mins} minutes")
    return (f"A train travels at {v} kilometers per hour. How far does it travel in {when}?"), v * (t + Fraction(mins, 60))


@_math
def reading_days(r, c):
    p, d = r.randint(5, 40), r.randint(4, 20)
    return (f"{c.p.name} reads {p} pages a day. How many days will it take {c.p.him} "
            f"to finish a book with {p * d} pages?"), Fraction(d)


@_math
def wage_savings(r, c):
    w, h, k = r.randint(8, 25), r.randint(5, 30), r.randint(2, 10)
    s = 5 * r.randint(2, max(2, (w * h - 10) // 5))
    return (f"{c.p.name} earns {_money(w)} per hour and works {h} hours each week. {c.p.He} spends {_money(s)} "
            f"each week on {c.expense} and saves the rest. How much does {c.p.he} save in {k} weeks?"), Fraction((w * h - s) * k)


@_math
def third_and_quarter(r, c):
    n = 12 * r.randint(2, 20)
    i = c.item[1]
    return (f"{c.p.name} has {n} {i}. {c.p.He} gives a third of them to {c.q.name} and a quarter of them to "
            f"{c.s.name}. How many {i} does {c.p.name} have left?"), Fraction(n - n // 3 - n // 4)


@_math
def half_and_fifth(r, c):
    n = 10 * r.randint(2, 30)
    i = c.item[1]
    return (f"{c.p.name} had {n} {i}. {c.p.He} used half of them for a school project and then gave a fifth "
            f"of the rest to {c.q.name}. How many {i} does {c.p.he} have now?"), Fraction(n // 2 - n // 10)


@_math
def ages(r, c):
    a, k, y = r.randint(4, 15), r.randint(2, 4), r.randint(2, 10)
    return (f"{c.p.name} is {a} years old, and {c.p.his} aunt is {k} times as old. "
            f"How old will {c.p.his} aunt be in {y} years?"), Fraction(a * k + y)


@_math
def test_average(r, c):
    s1, s2 = r.randint(60, 100), r.randint(60, 100)
    s3 = r.choice([s for s in range(60, 101) if (s1 + s2 + s) % 3 == 0])
    return (f"{c.p.name} scored {s1}, {s2} and {s3} on three math tests. What is {c.p.his} average score?"), Fraction(s1 + s2 + s3, 3)


@_math
def fence_cost(r, c):
    l, w, cost = r.randint(5, 40), r.randint(3, 30), r.randint(2, 15)
    return (f"A rectangular garden is {l} meters long and {w} meters wide. {c.p.name} wants to put a fence "
            f"around it. Fencing costs {_money(cost)} per meter. How much will the fence cost?"), Fraction(2 * (l + w) * cost)


@_math
def garden_area(r, c):
    l, w, s = r.randint(4, 30), r.randint(3, 20), r.choice([2, 4, 5, 10])
    area = l * w
    return (f"A lawn is {l} meters long and {w} meters wide. One bag of grass seed covers {s} square meters. "
            f"How many bags are needed to cover the whole lawn?"), Fraction(-(-area // s))


@_math
def recipe_scale(r, c):
    a, b, k = r.randint(1, 4), r.choice([6, 8, 10, 12, 24]), r.randint(2, 5)
    return (f"A recipe uses {_pl(a, 'cup')} of flour to make {b} {c.baked}. "
            f"How many cups of flour are needed to make {b * k} {c.baked}?"), Fraction(a * k)


@_math
def savings_goal(r, c):
    w, n, have = r.randint(5, 30), r.randint(3, 15), r.randint(10, 80)
    price = have + w * n
    return (f"{c.p.name} wants to buy a {c.pricey} that costs {_money(price)}. {c.p.He} already has {_money(have)} "
            f"and saves {_money(w)} each week. How many weeks will it take {c.p.him} to have enough money?"), Fraction(n)


@_math
def twice_plus(r, c):
    a, b = r.randint(3, 40), r.randint(1, 15)
    i = c.item[1]
    return (f"{c.p.name} has {a} {i}. {c.q.name} has {b} more than twice as many {i} as {c.p.name}. "
            f"How many {i} do they have together?"), Fraction(a + 2 * a + b)


@_math
def bakery_left(r, c):
    rate, h = r.randint(6, 40), r.randint(3, 10)
    sold = r.randint(rate, rate * h - 1)
    return (f"A bakery bakes {rate} {c.baked} every hour for {h} hours. By closing time it has sold {sold} of them. "
            f"How many {c.baked} are left?"), Fraction(rate * h - sold)


@_math
def two_purchases(r, c):
    m = r.randint(20, 200)
    a = r.randint(2, m // 2)
    b = r.randint(1, m - a - 1)
    return (f"{c.p.name} had {_money(m)}. {c.p.He} spent {_money(a)} on a {c.cheap[0]} and {_money(b)} on {c.expense}. "
            f"How much money does {c.p.he} have left?"), Fraction(m - a - b)


@_math
def board_pieces(r, c):
    i = r.choice([2, 3, 4, 6, 8, 12])
    f = r.choice([f for f in range(2, 13) if (f * 12) % i == 0])
    return (f"A wooden board is {f} feet long. {c.p.name} cuts it into pieces that are {i} inches long. "
            f"How many pieces does {c.p.he} get?"), Fraction(f * 12, i)


@_math
def coins(r, c):
    q, d, n = r.randint(2, 12), r.randint(2, 12), r.randint(2, 12)
    return (f"{c.p.name} has {q} quarters, {d} dimes and {n} nickels. How much money does {c.p.he} have, in cents?"), Fraction(25 * q + 10 * d + 5 * n)


@_math
def vacation_days(r, c):
    w, d = r.randint(2, 10), r.randint(1, 6)
    return f"{c.p.name}'s summer vacation lasts {w} weeks and {_pl(d, 'day')}. How many days is that in total?", Fraction(7 * w + d)


@_math
def vans_needed(r, c):
    cap = r.randint(6, 15)
    k = cap * r.randint(2, 8) + r.randint(1, cap - 1)
    return (f"{k} students from a {c.place} are going on a field trip. Each van holds {cap} students. "
            f"How many vans are needed?"), Fraction(math.ceil(k / cap))


@_math
def unit_price(r, c):
    k, p = r.choice([2, 3, 4, 5, 6, 8, 10]), Fraction(r.randint(2, 40), 4)
    n = r.randint(2, 12)
    return (f"A pack of {k} {c.cheap[1]} costs {_money(p * k)}. How much do {n} {c.cheap[1]} cost at the same price?"), p * n


_SIMPLE_MATH = ("add_more", "give_away", "boxes", "share_equally", "buy_price", "movie_minutes",
                "reading_days", "vacation_days", "km_to_m", "three_days")


def _math_prompt(r: random.Random, name: str) -> str:
    cast = _draw_cast(r)
    text, _ = _MATH[name](r, cast)
    return r.choice(_MATH_OPENERS) + text + " " + r.choice(_MATH_ASKS)


# ----------------------------------------------------------------------------------------------
# Code: classic tasks (hand-written, Python-version independent), stdlib objects read by inspect,
# and short code-reading snippets with varied values.
# ----------------------------------------------------------------------------------------------

_CLASSIC_TASKS = """\
reverses a string
checks whether a string is a palindrome
counts the vowels in a string
returns the factorial of a number
returns the n-th Fibonacci number
prints the numbers from 1 to 100, but prints "Fizz" for multiples of three, "Buzz" for multiples of five and "FizzBuzz" for multiples of both
checks whether a number is prime
returns all prime numbers below n
finds the largest number in a list without using max
returns the second largest number in a list
removes duplicates from a list while keeping the original order
counts how many times each word appears in a sentence
splits a CSV line into fields, handling commas inside quotes
parses lines like "name,age" into a list of dictionaries
converts a temperature from Celsius to Fahrenheit
converts a temperature from Fahrenheit to Celsius
converts kilometers to miles
checks whether two strings are anagrams of each other
capitalizes the first letter of every word in a sentence
returns the sum of the digits of an integer
merges two sorted lists into one sorted list
flattens a nested list
finds the most common element in a list
checks whether a year is a leap year
computes the greatest common divisor of two numbers
computes the least common multiple of two numbers
converts a non-negative integer to its binary representation as a string
converts a binary string to an integer
counts the words in a piece of text
returns the longest word in a sentence
checks whether the brackets in a string are balanced
performs binary search on a sorted list
sorts a list of numbers with bubble sort
sorts a list of dictionaries by the value of a given key
groups a list of words by their first letter
transposes a matrix given as a list of lists
adds two matrices given as lists of lists
returns the average of a list of numbers, or None for an empty list
returns the median of a list of numbers
rotates a list to the right by k positions
splits a list into chunks of size n
checks whether a list is sorted
returns the common elements of two lists
removes all whitespace from a string
replaces every vowel in a string with an asterisk
counts the uppercase and lowercase letters in a string
returns a dictionary that maps each character of a string to how often it appears
swaps the keys and values of a dictionary
merges two dictionaries, adding the values of keys that appear in both
returns the number of lines in a text file
writes a list of strings to a file, one per line
generates a random password of a given length
simulates rolling two dice and returns the total
converts a number of seconds into hours, minutes and seconds
returns the day of the week for a date given as year, month and day
calculates compound interest for a principal, a yearly rate and a number of years
computes the area of a circle from its radius
checks whether a number is a perfect square
checks whether a number is a power of two
converts a Roman numeral to an integer
converts an integer to a Roman numeral
encrypts a message with a Caesar cipher
compresses a string with run-length encoding, so "aaabb" becomes "a3b2"
finds all pairs of numbers in a list that add up to a target
returns the running totals of a list of numbers
finds the missing number in a list that contains the numbers from 1 to n
counts the number of 1 bits in an integer
checks whether a string contains only digits
shortens a string to n characters and adds "..." when it was longer
pads a number with leading zeros to a given width
joins a list of names as "A, B and C"
returns the three most common words in a text
removes punctuation from a string
checks whether a sentence is a pangram
computes the dot product of two vectors
returns the prime factors of a number
prints the first n rows of Pascal's triangle
returns every subset of a list
returns all permutations of a string
finds the longest common prefix of a list of strings
checks whether a string is a valid date in the format YYYY-MM-DD
converts snake_case names to camelCase
converts camelCase names to snake_case
extracts all the numbers from a string
computes the body mass index from weight and height
returns the total price of a shopping cart given as a dictionary of prices and quantities
returns the number of days between two dates
counts the lines, words and characters in a string
wraps text so that no line is longer than a given width
removes every occurrence of a value from a list
returns the index of the first repeated character in a string
converts a list of words to a sentence with the first word capitalized and a period at the end
returns the sum of all even numbers in a list
returns the squares of the numbers from 1 to n
counts how many numbers in a list are greater than a given value
checks whether all the characters in a string are unique
returns the n largest numbers of a list in descending order
converts a dictionary to a query string like "a=1&b=2"
reads a JSON file and returns the value for a given key
returns the words of a sentence in reverse order
computes the mean and standard deviation of a list of numbers
finds the first non-repeating character in a string
checks whether a number is an Armstrong number
returns a multiplication table for a number as a list of strings
converts a list of temperatures in Celsius to Fahrenheit with a list comprehension
validates that a password has at least 8 characters, a digit and an uppercase letter
counts the occurrences of a substring in a string without using str.count
interleaves two lists, taking one element from each in turn
returns the digits of an integer as a list
computes the sum of a list recursively
returns the nested depth of a list
checks whether a number is even or odd
returns the list of divisors of a number
converts a string to a list of its character codes
returns the longest palindrome inside a string
removes the empty strings from a list
returns a new list with every element doubled
returns the sum of a list of numbers without using sum
returns the smallest and the largest number of a list as a tuple
finds the index of a value in a list, or -1 if it is missing
converts hours and minutes to a total number of minutes
returns the number of vowels and consonants in a word
swaps the first and last elements of a list
returns the product of all the numbers in a list
checks whether a list contains any duplicates
returns the keys of a dictionary sorted by their values
counts the even and the odd numbers in a list
returns the k-th smallest element of a list
returns a list of n random integers between 1 and 100
converts a list of strings to integers, skipping the ones that are not numbers
returns the initials of a full name
hides all but the last four digits of a card number
checks whether a number reads the same forwards and backwards
counts how often a letter appears in a word, ignoring case
""".splitlines()

_CLASSIC_FRAMES = [
    "Write a Python function that {}.",
    "Write a short Python function that {}. Include a docstring.",
    "Write a Python function that {}, and show an example call.",
    "In Python, write a function that {}. Explain how it works.",
    "Write a Python function that {}. Add a few test cases using assert.",
]

_CLASS_TASKS = """\
a stack with push, pop and peek methods
a queue with enqueue and dequeue methods
a bank account with deposit, withdraw and balance methods that refuses overdrafts
a rectangle with methods for area and perimeter
a to-do list that can add, remove and list tasks
a counter that can be incremented and reset
a temperature with Celsius and Fahrenheit properties
a singly linked list with append and a method that prints every value
a shopping cart that adds items and computes the total price
a context manager that prints how long a block of code took
a 2D point with a method that returns the distance to another point
a student with a name and a list of grades, and a method for the average grade
a small LRU cache with get and put methods
an inventory that tracks item names and quantities
a playing card deck that can shuffle and deal cards
a timer that can start, stop and report elapsed seconds
a simple key-value store that saves itself to a JSON file
a fraction with addition and a readable string form
a library that lets members borrow and return books
a vending machine that accepts coins and dispenses snacks
a circle with methods for area and circumference
a simple calculator with add, subtract, multiply and divide methods
a dog with a name and a bark method
a book with a title, an author and a readable string form
a clock that can add minutes and show the time as HH:MM
""".splitlines()

_CLASS_FRAMES = [
    "Write a Python class for {}.",
    "Implement {} as a Python class, with a short usage example.",
    "Write a Python class for {}. Keep it simple and add docstrings.",
]

# Code-reading snippets: a template and a function drawing its holes; `r` varies the values.
_WORDS = ["apple", "banana", "cherry", "python", "rocket", "garden", "planet", "silver", "window", "tiger",
          "orange", "music", "river", "pencil", "coffee", "dragon", "summer", "castle", "forest", "bottle"]


_SNIPPET_ASKS = [
    "What does this Python code print? Explain why.",
    "Explain step by step what this Python code does and what it prints.",
    "Predict the output of this Python code and explain it.",
]


def _snippet(r: random.Random) -> str:
    w, w2, w3 = r.sample(_WORDS, 3)
    a, b, n, k = r.randint(10, 99), r.randint(2, 9), r.randint(3, 8), r.randint(2, 5)
    nums = r.sample(range(1, 30), 5)
    code = r.choice([
        f'print("{w}"[::-1])',
        f'print("-".join(["{w}", "{w2}", "{w3}"]))',
        f"print([x * {k} for x in range({n})])",
        f"print(sum(range({n})))",
        f"print({a} // {b}, {a} % {b})",
        f"print(sorted({nums}, reverse=True))",
        f'print(len("{w}") + len("{w2}"))',
        f'print("{w}".upper().count("{w[0].upper()}"))',
        f'print(list(zip([1, 2, 3], "{w[:3]}")))',
        f'd = {{"{w}": {a}, "{w2}": {b}}}\nprint(d.get("{w3}", 0) + d["{w}"])',
        f"nums = {nums}\nprint(max(nums) - min(nums))",
        f'print([c for c in "{w}" if c in "aeiou"])',
        f"print(list(filter(lambda x: x % {k} == 0, {nums})))",
        f'print({{c: "{w}".count(c) for c in "{w}"}})',
        f"nums = {nums}\nprint(nums[1:{k + 1}], nums[-1])",
        f'print("{w} {w2} {w3}".split()[{r.randint(0, 2)}].title())',
        f"print(list(enumerate(['{w}', '{w2}'], start={k})))",
        f"x = {a}\nwhile x > {b * 5}:\n    x -= {b}\nprint(x)",
        f"total = 0\nfor i in range(1, {n + 1}):\n    total += i * i\nprint(total)",
        f'print(f"{{{a} / {b}:.2f}}")',
        f"print(any(x > {a % 30} for x in {nums}), all(x > 0 for x in {nums}))",
        f"s = set({nums[:3]}) | set({nums[2:]})\nprint(len(s))",
    ])
    return f"{r.choice(_SNIPPET_ASKS)}\n\n```python\n{code}\n```"


# Modules that import cleanly with no side effects, in any environment; private names are skipped.
_STDLIB_MODULES = (
    "string textwrap itertools functools collections math statistics json csv re os.path heapq bisect "
    "random datetime calendar fractions decimal difflib fnmatch glob base64 binascii hashlib zlib gzip "
    "urllib.parse html shlex operator copy pprint enum dataclasses pathlib tempfile uuid ipaddress "
    "colorsys struct array secrets unicodedata email.utils mimetypes zipfile tarfile sqlite3 logging "
    "argparse contextlib inspect keyword numbers cmath time platform quopri graphlib tokenize types "
    "weakref queue sched codecs configparser plistlib filecmp stat reprlib abc io shutil html.parser "
    "xml.etree.ElementTree http.client threading concurrent.futures subprocess traceback locale gettext "
    "shelve zipapp netrc wave"
).split()
_BUILTIN_TYPES = (str, list, dict, set, frozenset, bytes, int, float, tuple)
_MODULE_ALIASES = {"os.path": ("posixpath", "ntpath", "genericpath")}

# Imperative verbs that open stdlib docstrings ("Return the cosine of x.") and read well as a task.
_VERBS = set("""
return compute convert create split join remove read write parse encode decode format find search
replace check test make build get add insert delete apply count sort merge copy calculate generate
escape unescape quote unquote strip wrap fill dedent indent normalize compare match extract pack
unpack translate expand compile load dump serialize construct filter group reverse shorten truncate
round raise map reduce accumulate repeat combine chain yield collapse determine tell guess open close
clear update append extend pop pick choose shuffle sample validate lowercase uppercase capitalize
center justify partition transform hash compress decompress print iterate list walk scan locate
collect rename move delay register retrieve produce emit fetch decorate simplify sum multiply divide
""".split())


@dataclass(frozen=True)
class _StdlibEntry:
    ref: str  # e.g. "textwrap.dedent" or "str.split"
    sentence: str  # first sentence of its docstring, cleaned
    is_class: bool
    is_python: bool  # written in Python (so "implement a simplified version" is sensible)


def _clean_doc_sentence(doc: str | None) -> str | None:
    """First sentence of a docstring's first prose paragraph, or None when it reads badly."""
    if not doc:
        return None
    for para in inspect.cleandoc(doc).split("\n\n"):
        p = " ".join(para.split())
        if not p or "-->" in p or "::=" in p or p.startswith(("|", ">>>", "=")) or re.match(r"^[\w.]+\(.*\)", p):
            continue
        break
    else:
        return None
    p = p.replace("e.g.", "for example").replace("i.e.", "that is").replace("etc.", "and so on")
    p = re.sub(r":\w+:`~?([^`]+)`", r"\1", p)  # :func:`x` -> x
    p = re.sub(r"\*{1,2}(\w+)\*{1,2}", r"\1", p.replace("``", "").replace("`", ""))  # *x*, **x** -> x
    s = re.split(r"(?<=[.!?])\s+(?=[A-Z(])", p)[0].strip()
    if not s.endswith("."):
        s += "."
    words = s.split()
    bad = r"\b(deprecated|internal|undocumented|private|python 2|xxx|todo|jython|self)\b"
    if not 4 <= len(words) <= 32 or not s.isascii() or re.search(bad, s.lower()):
        return None
    if s.count("(") != s.count(")") or s.count('"') % 2 or s.endswith((":.", ",.", ";.")):
        return None
    return s


def _third_person(sentence: str) -> str | None:
    """'Return the cosine of x.' -> 'returns the cosine of x'; None if it doesn't open with a verb."""
    words = sentence.rstrip(".").split()
    lead: list[str] = []
    if words[0].lower().endswith("ly") and len(words) > 1:  # "Recursively delete ..."
        lead, words = [words[0].lower()], words[1:]
    verb = words[0].lower()
    if verb in _VERBS:
        if verb in ("do", "go") or verb.endswith(("s", "sh", "ch", "x", "z")):
            verb += "es"
        elif verb.endswith("y") and verb[-2] not in "aeiou":
            verb = verb[:-1] + "ies"
        else:
            verb += "s"
    elif not (verb.endswith("s") and verb[:-1] in _VERBS or verb.endswith("es") and verb[:-2] in _VERBS):
        return None
    return " ".join(lead + [verb] + words[1:])


def _own_module(obj: object, modname: str) -> bool:
    om = getattr(obj, "__module__", None) or ""
    return om == modname or om.lstrip("_") == modname or om in _MODULE_ALIASES.get(modname, ())


def _entry(ref: str, obj: object, is_python: bool) -> _StdlibEntry | None:
    sentence = _clean_doc_sentence(getattr(obj, "__doc__", None))
    if sentence is None:
        return None
    return _StdlibEntry(ref, sentence, inspect.isclass(obj), is_python)


@lru_cache(maxsize=1)
def _stdlib_entries() -> tuple[_StdlibEntry, ...]:
    """Public functions, classes and methods of the allow-listed stdlib modules and builtin types."""
    out: list[_StdlibEntry] = []
    for t in _BUILTIN_TYPES:
        for name, obj in sorted(vars(t).items()):
            if not name.startswith("_") and callable(obj) and (e := _entry(f"{t.__name__}.{name}", obj, False)):
                out.append(e)
    for name, obj in sorted(vars(builtins).items()):
        if not name.startswith("_") and inspect.isbuiltin(obj) and name not in ("breakpoint", "exec", "eval", "input"):
            if e := _entry(name, obj, False):
                out.append(e)
    for modname in _STDLIB_MODULES:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mod = importlib.import_module(modname)
        except Exception:  # absent on this platform: skip, the rest still works
            continue
        for name, obj in sorted(vars(mod).items()):
            if name.startswith("_") or not _own_module(obj, modname):
                continue
            if inspect.isclass(obj):
                if issubclass(obj, BaseException):
                    continue
                if e := _entry(f"{modname}.{name}", obj, False):
                    out.append(e)
                for mname, meth in sorted(vars(obj).items()):
                    if not mname.startswith("_") and inspect.isfunction(meth):
                        if e := _entry(f"{modname}.{name}.{mname}", meth, True):
                            out.append(e)
            elif inspect.isfunction(obj) or inspect.isbuiltin(obj):
                if e := _entry(f"{modname}.{name}", obj, inspect.isfunction(obj)):
                    out.append(e)
    seen: set[str] = set()
    return tuple(e for e in out if not (e.ref in seen or seen.add(e.ref)))


@lru_cache(maxsize=1)
def _stdlib_code_prompts() -> dict[str, list[str]]:
    explain, write, implement, use = [], [], [], []
    for e in _stdlib_entries():
        ref = f"`{e.ref}`"
        if e.is_class:
            explain.append(f"Explain what the {ref} class is for and write a short example that uses it.")
            continue
        explain.append(f"Explain what {ref} does in Python and show a short example.")
        use.append(f"Show how to use {ref} in a small, practical Python example.")
        vp = _third_person(e.sentence)
        if vp:
            write.append(f"Without using {ref}, write a Python function that {vp}.")
            if e.is_python or e.ref.split(".")[0] in ("str", "list", "dict", "set"):
                implement.append(f"Implement a simplified version of {ref} in pure Python and explain how it works.")
    return {"stdlib_explain": explain, "stdlib_write": write, "stdlib_implement": implement, "stdlib_use": use}


# ----------------------------------------------------------------------------------------------
# Chat: everyday templates with hand-written slots, plus explanations built from the Python
# documentation that ships with the interpreter (module docstrings, pydoc topics, keywords).
# ----------------------------------------------------------------------------------------------

_CONCEPTS = """\
photosynthesis|the water cycle|gravity|a rainbow|inflation|compound interest|vaccines|black holes
the immune system|climate change|electricity|magnetism|volcanoes|earthquakes|the seasons|tides
the phases of the moon|DNA|evolution|the greenhouse effect|recycling|the internet|a computer virus
machine learning|an algorithm|a budget|supply and demand|the stock market|a credit score|taxes
democracy|the solar system|a leap year|time zones|the speed of light|sound waves|friction
the food chain|a balanced diet|sleep|exercise|stress|meditation|the heart|the brain|digestion
renewable energy|solar panels|wind turbines|nuclear power|batteries|a thermometer|clouds
thunder and lightning|snowflakes|the ocean|coral reefs|rainforests|deserts|bees|migration of birds
dinosaurs|fossils|the pyramids|the printing press|the wheel|money|banks|insurance|interest rates
a mortgage|a resume|a job interview|teamwork|leadership|critical thinking|the scientific method
a hypothesis|statistics|probability|fractions|percentages|negative numbers|prime numbers|geometry
the Pythagorean theorem|algebra|a map scale|latitude and longitude|GPS|satellites|the Moon landing
rockets|airplanes and lift|bicycles and balance|cars and engines|traffic lights|bridges|skyscrapers
recycling plastic|compost|water purification|bacteria|viruses|antibiotics|allergies|fever
first aid|a healthy sleep routine|hydration|sunscreen|nutrition labels|caffeine|sugar|protein
vitamins|memory|habits|motivation|procrastination|time management|public speaking|negotiation
empathy|active listening|friendship|kindness|gratitude|poetry|a haiku|a metaphor|irony
the plot of a story|a library|an encyclopedia|a museum|the Olympic Games|chess|music notes
rhythm|colors and light|mirrors|lenses|microscopes|telescopes|a password manager|encryption
cloud storage|email|spam|a search engine|a spreadsheet|a database|open source software
""".replace("\n", "|").strip("|").split("|")

_CONCEPT_FRAMES = [
    "Explain {} to a beginner.",
    "Explain {} in simple terms.",
    "Tell me about {} in a few sentences.",
    "How would you explain {} to a ten-year-old?",
    "Give me three interesting facts about {}.",
    "Write a short paragraph that explains {}.",
]

_COMPARISONS = """\
weather and climate|a virus and bacteria|a lake and a pond|a simile and a metaphor|speed and velocity
a frog and a toad|an alligator and a crocodile|a hurricane and a tornado|a star and a planet
renting and buying a home|saving and investing|a debit card and a credit card|a want and a need
a laptop and a desktop computer|RAM and storage|Wi-Fi and mobile data|a browser and a search engine
a meteor and a meteorite|a moth and a butterfly|baking soda and baking powder|tea and coffee
a city and a town|a dolphin and a shark|an ocean and a sea|a fruit and a vegetable|jam and jelly
a novel and a short story|a democracy and a monarchy|an email and a letter|a hill and a mountain
a cold and the flu|walking and running|a hobby and a job|a goal and a dream|a fact and an opinion
""".replace("\n", "|").strip("|").split("|")

_COMPARE_FRAMES = [
    "What is the difference between {}?",
    "Compare {} in a short paragraph.",
    "Explain the main differences between {} with a simple example.",
]

_GOALS = """\
sleep better|save money on groceries|learn a new language|stay focused while studying|drink more water
make new friends in a new city|get better at public speaking|keep my room tidy|read more books
start running|cook healthier meals|spend less time on my phone|prepare for a job interview
wake up earlier|reduce stress before exams|learn to play the guitar|keep a plant alive|write better emails
remember people's names|stay motivated to exercise|organize my week|eat more vegetables
be more patient|take better notes in class|make my mornings less rushed|travel on a small budget
improve my handwriting|learn to type faster|keep in touch with old friends|start a vegetable garden
be more confident|learn to cook|reduce food waste at home|save energy at home|get better at chess
become a better listener|study for a math test|learn to draw|plan a birthday party|manage my time better
""".replace("\n", "|").strip("|").split("|")

_GOAL_FRAMES = [
    "How can I {}?",
    "Give me three tips to {}.",
    "Give me five simple ways to {}.",
    "I want to {}. Where should I start?",
]

_HOWTOS = """\
boil an egg|tie a tie|change a flat bicycle tire|make a cup of tea|plant a tree|wash a wool sweater
make a paper airplane|write a thank-you note|set up a budget|clean a laptop keyboard|make pancakes
pack a suitcase efficiently|start a journal|brew coffee with a French press|fold a fitted sheet
sew on a button|make a simple salad|prepare for a long hike|care for a goldfish|make a weekly meal plan
back up the photos on my phone|jump-start a car|remove a coffee stain|make a smoothie
clean a mirror without streaks|make homemade bread|build a birdhouse|train a puppy to sit|set up a home workout
wrap a present neatly|learn a song by ear|make a good first impression|change a light bulb safely
""".replace("\n", "|").strip("|").split("|")

_HOWTO_FRAMES = ["How do I {}?", "What are the steps to {}?", "Explain step by step how to {}."]

_CHARACTERS = [
    "a shy dragon", "a robot", "a lost kitten", "an old lighthouse keeper", "a young wizard", "a brave mouse",
    "a talking tree", "a curious astronaut", "a grumpy cat", "a little cloud", "a retired pirate",
    "a clumsy penguin", "a friendly ghost", "a detective dog", "a tiny snail", "a chef", "a girl who can fly",
    "a boy with a magic pencil", "an owl", "a lonely snowman",
]
_EVENTS = [
    "learns to bake bread", "loses its way home", "finds a mysterious map", "makes an unexpected friend",
    "enters a singing contest", "is afraid of the dark", "discovers a hidden door", "plants a garden",
    "tries to catch a falling star", "goes to school for the first time", "solves a small mystery",
    "learns to share", "builds a boat", "saves a village from a storm", "visits the city", "writes a letter",
    "wins a race by being kind", "forgets an important birthday", "meets a talking fish", "learns to swim",
]
_POEM_FORMS = ["a haiku", "a four-line poem", "a limerick", "a short rhyming poem"]
_POEM_TOPICS = [
    "the ocean", "autumn leaves", "a rainy day", "coffee", "the moon", "a cat", "friendship", "spring",
    "the city at night", "mountains", "a snowy morning", "the sun", "a garden", "books", "the wind", "stars",
    "a train journey", "summer holidays", "birds", "music", "a candle", "the first day of school", "bread",
    "a river", "homework", "a bicycle", "the sea", "a thunderstorm", "a sunflower", "a quiet library",
]
_TONES = ["polite", "friendly", "formal", "short"]
_RECIPIENTS = [
    "my manager", "a coworker", "my teacher", "my neighbor", "my landlord", "a customer", "my team",
    "a professor", "a new client", "my friend",
]
_PURPOSES = [
    "asking for an extension on an assignment", "congratulating them on a promotion", "welcoming them to the team",
    "following up on my job application", "asking for a refund", "confirming our meeting on Tuesday",
    "sharing good news about the project", "asking to switch shifts next week", "thanking them for a gift",
    "asking for directions to the office", "asking for a copy of the invoice", "letting them know my new address",
    "asking to move our meeting to Friday", "thanking them for their help last week",
    "apologizing for a late reply", "asking for a day off next Monday", "inviting them to a small party",
    "asking about the status of my order", "saying I will be late tomorrow", "asking for feedback on my work",
    "reminding them about a deadline", "introducing myself", "asking to borrow a ladder",
    "reporting a broken heater", "declining an invitation kindly", "asking for a recommendation letter",
    "sharing the notes from today's meeting", "asking for help with a project",
]
_WORDS_TO_DEFINE = """\
ubiquitous resilient meticulous ambiguous empathy nostalgia serendipity candid diligent frugal
eloquent tenacious pragmatic curious generous humble vivid obsolete sustainable transparent
versatile reluctant spontaneous gratitude integrity ephemeral benevolent cautious optimistic skeptical
inevitable innovative concise redundant authentic coherent persistent anonymous hypothesis metaphor
""".split()
_WORD_FRAMES = [
    "What does the word '{}' mean? Use it in a sentence.",
    "Define '{}' in simple words and give two example sentences.",
]
_LIST_TASKS = """\
healthy breakfast ideas|names for a pet goldfish|indoor activities for a rainy day|fun facts about space
things to pack for a beach trip|ways to be kind to a stranger|easy dinners for a busy week
questions to ask at a job interview|games to play at a birthday party|hobbies you can start for free
tips for a first day at a new job|reasons to learn a second language|houseplants that are hard to kill
ways to reduce plastic waste|books for a ten-year-old who likes adventure|snacks for a long car ride
ideas for a science fair project|ways to relax after a long day|classic board games for families
things to do in a small town on a weekend
""".replace("\n", "|").strip("|").split("|")
_LIST_FRAMES = ["List five {}.", "Suggest three {}.", "Give me a short list of {}."]
_SETTINGS = [
    "", " in a busy city", " on a small island", " in a snowy village", " on a spaceship", " in an enchanted forest",
    " at the bottom of the sea", " in a desert town", " during a thunderstorm",
]
_PERSONAS = [
    "a high school student", "a new parent", "a retired teacher", "a nurse who works night shifts",
    "a college student on a budget", "someone who works from home", "a complete beginner", "very busy at work",
]
_WHY = """\
Why is the sky blue?|Why do leaves change color in autumn?|Why do we yawn?|Why is the ocean salty?
Why do cats purr?|Why do we need sleep?|Why does ice float?|Why do onions make us cry?|Why do birds migrate?
Why is exercise good for the brain?|Why do we get hiccups?|Why does bread go stale?|Why do stars twinkle?
Why do apples turn brown after they are cut?|Why do boats float?|Why is it colder on top of a mountain?
Why do dogs wag their tails?|Why do we dream?|Why does the moon change shape?|Why do we sweat?
Why do planes leave white trails in the sky?|Why do our ears pop on a plane?|Why does popcorn pop?
Why do soap bubbles look rainbow colored?|Why do some people need glasses?|Why does metal feel colder than wood?
Why are cities hotter than the countryside?|Why do bees make honey?|Why does salt melt ice?|Why do we blink?
Why do our fingers wrinkle in water?|Why are flamingos pink?|Why do zebras have stripes?|Why do we shiver?
Why does soap clean our hands?|Why do phones need to be charged?|Why do songs get stuck in our heads?
Why do people have accents?|Why do camels have humps?|Why does the wind blow?|Why do we get goosebumps?
Why does thunder come after lightning?|Why do eggs get hard when they are boiled?|Why do owls hunt at night?
Why does coffee keep people awake?|Why does a compass point north?|Why do we need vitamins?
Why do volcanoes erupt?|Why does hot air rise?|Why is the Earth round?|Why do some animals hibernate?
Why do bicycles stay upright when they move?|Why do we laugh?|Why does the sea have waves?
Why are some people left-handed?|Why do cats like boxes?|Why do fireflies glow?|Why does music move us?
Why do we need to drink water?|Why does old paper turn yellow?|Why do tires have treads?
Why do mosquitoes bite some people more than others?|Why are the days shorter in winter?
Why do we have fingerprints?|Why does a spoon look bent in a glass of water?|Why do plants need sunlight?
Why do we get sunburned?|Why does a balloon stick to the wall after you rub it?|Why do rivers flow to the sea?
""".replace("\n", "|").strip("|").split("|")
_WHY_FRAMES = ["{}", "{} Explain it simply.", "{} Answer in two or three sentences."]
_REWRITE_SENTENCES = [
    "i cant come to the meeting tomorrow because im sick", "The report is late because we had many problems.",
    "Please send me the files as soon as possible.", "We need to talk about the budget.",
    "Thanks for the gift, I really like it.", "The store will be closed on Monday for repairs.",
    "Can you help me move on Saturday?", "Our team finished the project two days early.",
    "I think we should try a different approach.", "The meeting has been moved to 3 pm.",
    "Your order has shipped and will arrive on Thursday.", "I am writing to complain about the noise at night.",
    "Don't forget to bring your own water bottle.", "The new park opens next week and everyone is invited.",
    "I would like to return these shoes because they are too small.", "Sorry for the delay in getting back to you.",
    "The printer on the second floor is broken again.", "We are looking for volunteers for the book fair.",
    "Please turn off the lights when you leave the room.", "I loved the book, but the ending was a bit slow.",
    "The train was late, so I missed the first class.", "Let's meet at the cafe near the station at noon.",
    "The weather today is cold and rainy.", "Your password will expire in three days.",
]
_STYLES = ["more formal", "more friendly", "shorter", "more polite", "sound more confident"]
_DESTINATIONS = [
    "a big city", "the mountains", "the beach", "a national park", "Paris", "Tokyo", "Rome", "a small island",
    "the countryside", "New York", "Barcelona", "a lake",
]
_EXAMS = ["a math test", "a history exam", "a driving theory test", "a spelling quiz", "a biology exam", "a piano recital"]
_TRAINEES = ["a complete beginner", "a busy parent", "an office worker", "a teenager", "someone over sixty",
             "someone training for a 5K run", "someone with no equipment", "a student with a small room"]


def _fill(frames: Sequence[str], slots: Iterable[str]) -> list[str]:
    return [f.format(s) for s in slots for f in frames]


def _python_doc_prompts() -> list[str]:
    """Chat prompts built from documentation text that ships with Python."""
    out: list[str] = []
    for modname in _STDLIB_MODULES:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mod = importlib.import_module(modname)
        except Exception:
            continue
        out.append(f"What is the Python `{modname}` module used for? Give a short example.")
        sentence = _clean_doc_sentence(mod.__doc__)
        if sentence and not sentence.lower().startswith((modname, "this module", "module")):
            out.append(f'The Python documentation describes the `{modname}` module as: "{sentence}" '
                       f"Explain what that means to a beginner.")
    try:
        from pydoc_data.topics import topics
    except ImportError:  # some distributions strip it
        topics = {}
    for key, text in sorted(topics.items()):
        title = text.split("\n", 1)[0].strip()
        title = re.sub(r'"(\w+)"', r"`\1`", title.split(" — ")[0])
        if title.isascii() and 1 <= len(title.split()) <= 6 and not title.startswith(("Emulating", "Basic", "Special")):
            t = title[0].lower() + title[1:] if not title[:2].isupper() else title
            out.append(f"Explain {t} in Python to a beginner, with a simple example.")
    for e in _stdlib_entries():
        out.append(f'The Python documentation describes `{e.ref}` like this: "{e.sentence}" '
                   f"Explain that in plain English.")
    for kw in keyword.kwlist:
        if kw.isalpha() and kw not in ("True", "False", "None"):
            out.append(f"What does the `{kw}` keyword do in Python? Give a simple example.")
    return out


@lru_cache(maxsize=1)
def _chat_pools() -> dict[str, list[str]]:
    return {
        "concept": _fill(_CONCEPT_FRAMES, _CONCEPTS),
        "compare": _fill(_COMPARE_FRAMES, _COMPARISONS),
        "advice": _fill(_GOAL_FRAMES, _GOALS) + [f"I am {p}. How can I {g}?" for p in _PERSONAS for g in _GOALS],
        "howto": _fill(_HOWTO_FRAMES, _HOWTOS),
        "story": [f"Write a short story about {c} who {e}{s}." for c in _CHARACTERS for e in _EVENTS for s in _SETTINGS],
        "poem": [f"Write {f} about {t}." for f in _POEM_FORMS for t in _POEM_TOPICS],
        "email": [f"Write a {t} email to {w} {p}." for t in _TONES for w in _RECIPIENTS for p in _PURPOSES],
        "word": _fill(_WORD_FRAMES, _WORDS_TO_DEFINE),
        "list": _fill(_LIST_FRAMES, _LIST_TASKS),
        "why": _fill(_WHY_FRAMES, _WHY),
        "rewrite": [f'Rewrite this sentence to be {st}: "{se}"' for se in _REWRITE_SENTENCES for st in _STYLES],
        "plan": [f"Plan a {n}-day trip to {d} on a small budget." for d in _DESTINATIONS for n in range(2, 8)]
        + [f"Make a {n}-day study plan for {e}." for e in _EXAMS for n in range(3, 8)]
        + [f"Create a simple weekly workout plan for {t}." for t in _TRAINEES],
        "python_docs": _python_doc_prompts(),
    }


# ----------------------------------------------------------------------------------------------
# Streams: each domain is a weighted interleaving of its kinds, each kind an iterator with its own
# seeded rng, so the order is fixed by the seed and a longer run extends a shorter one (prefix-stable).
# ----------------------------------------------------------------------------------------------

_KindFactory = Callable[[random.Random], Iterator[str]]


def _shuffled(pool: Callable[[], list[str]]) -> _KindFactory:
    def make(r: random.Random) -> Iterator[str]:
        items = sorted(set(pool()))
        r.shuffle(items)
        return iter(items)
    return make


def _forever(draw: Callable[[random.Random], str]) -> _KindFactory:
    def make(r: random.Random) -> Iterator[str]:
        while True:
            yield draw(r)
    return make


def _math_kinds() -> dict[str, tuple[float, _KindFactory]]:
    return {name: (1.0, _forever(lambda r, name=name: _math_prompt(r, name))) for name in _MATH}


def _stdlib_pool(kind: str) -> Callable[[], list[str]]:
    return lambda: _stdlib_code_prompts()[kind]


def _code_kinds() -> dict[str, tuple[float, _KindFactory]]:
    return {
        "classic": (0.30, _shuffled(lambda: _fill(_CLASSIC_FRAMES, [t for t in _CLASSIC_TASKS if t]))),
        "class": (0.05, _shuffled(lambda: _fill(_CLASS_FRAMES, [t for t in _CLASS_TASKS if t]))),
        "snippet": (0.15, _forever(_snippet)),
        "stdlib_explain": (0.15, _shuffled(_stdlib_pool("stdlib_explain"))),
        "stdlib_write": (0.15, _shuffled(_stdlib_pool("stdlib_write"))),
        "stdlib_implement": (0.10, _shuffled(_stdlib_pool("stdlib_implement"))),
        "stdlib_use": (0.10, _shuffled(_stdlib_pool("stdlib_use"))),
    }


def _chat_kinds() -> dict[str, tuple[float, _KindFactory]]:
    weights = {"concept": 0.18, "compare": 0.05, "advice": 0.09, "howto": 0.07, "story": 0.10, "poem": 0.05,
               "email": 0.09, "word": 0.04, "list": 0.05, "why": 0.09, "rewrite": 0.05, "plan": 0.04,
               "python_docs": 0.10}
    return {k: (w, _shuffled(lambda k=k: _chat_pools()[k])) for k, w in weights.items()}


_KINDS: dict[str, Callable[[], dict[str, tuple[float, _KindFactory]]]] = {
    "math": _math_kinds, "code": _code_kinds, "chat": _chat_kinds,
}
# Kinds whose text does not depend on the Python version: the demo prompts come only from these.
_DEMO_KINDS = {
    "math": _SIMPLE_MATH,
    "code": ("classic", "class"),
    "chat": ("concept", "why", "howto", "advice", "story", "poem", "email", "compare", "list"),
}


@dataclass(frozen=True)
class _Item:
    text: str
    kind: str


def _stream(domain: str, seed: int, kinds: Sequence[str] | None = None) -> Iterator[_Item]:
    """Distinct prompts of a domain in seeded order; ends when every finite kind is exhausted."""
    if domain not in _KINDS:
        raise ValueError(f"unknown domain {domain!r}; expected one of {DOMAINS}")
    spec = _KINDS[domain]()
    names = sorted(k for k in spec if kinds is None or k in kinds)
    iters = {k: spec[k][1](random.Random(f"{domain}:{k}:{seed}")) for k in names}
    chooser = random.Random(f"{domain}:{seed}")
    seen: set[str] = set()
    misses = 0
    while iters and misses < 10_000:  # an infinite kind that only repeats itself ends the stream
        live = sorted(iters)
        kind = chooser.choices(live, weights=[spec[k][0] for k in live])[0]
        try:
            text = next(iters[kind])
        except StopIteration:
            del iters[kind]
            continue
        key = normalise(text) if domain == "math" else text  # math: same problem, other names = duplicate
        if key in seen:
            misses += 1
            continue
        misses = 0
        seen.add(key)
        yield _Item(text, kind)


# ----------------------------------------------------------------------------------------------
# The split
# ----------------------------------------------------------------------------------------------

_TOKEN = re.compile(r"[a-z]+|\d+(?:\.\d+)?")
_REF = re.compile(r"(?<!`)`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)`(?!`)")
_STOPWORDS = {"a", "an", "the"}


def _tokens(text: str) -> list[str]:
    text = re.sub(r"(?<=\d),(?=\d)", "", text.lower())
    return [t for t in _TOKEN.findall(text) if t not in _STOPWORDS]


@lru_cache(maxsize=1)
def _fillers() -> tuple[frozenset[tuple[str, ...]], int]:
    """Phrases that vary without changing the task: names, props, frames, 'show your reasoning'."""
    phrases: list[str] = [p.name for p in _PEOPLE] + _PRONOUNS + _MATH_ASKS + _MATH_OPENERS
    phrases += [w for pair in _ITEMS + _CHEAP for w in pair] + _PRICEY + _CONTAINERS + _BAKED + _EXPENSES + _PLACES
    for frames in (_CONCEPT_FRAMES, _COMPARE_FRAMES, _GOAL_FRAMES, _HOWTO_FRAMES, _WORD_FRAMES, _LIST_FRAMES,
                   _CLASSIC_FRAMES, _CLASS_FRAMES, _WHY_FRAMES, _SNIPPET_ASKS):
        phrases += [part for f in frames for part in f.split("{}")]
    out = {tuple(t) for p in phrases if (t := _tokens(p))}
    return frozenset(out), max(len(t) for t in out)


def normalise(text: str) -> str:
    """The key a prompt is split on: near-duplicates of one task share it.

    A prompt naming a Python object in backticks (`textwrap.dedent`) is keyed by that name alone, so
    every prompt about one stdlib function is on one side. Otherwise: lowercase words and numbers,
    minus articles and filler phrases (names, props, frames), numbers kept.
    """
    if m := _REF.search(text):
        return "ref:" + m.group(1).lower()
    tokens = _tokens(text)
    fillers, longest = _fillers()
    kept: list[str] = []
    i = 0
    while i < len(tokens):
        for n in range(min(longest, len(tokens) - i), 0, -1):
            if tuple(tokens[i:i + n]) in fillers:
                i += n
                break
        else:
            kept.append(tokens[i])
            i += 1
    return " ".join(kept or tokens)


def split_of(prompt_text: str) -> str:
    """'train' or 'heldout', fixed forever by a salted hash of the normalised text."""
    digest = hashlib.sha256(f"{SPLIT_SALT}\n{normalise(prompt_text)}".encode()).digest()
    return "heldout" if int.from_bytes(digest[:8], "big") % 1000 < HELDOUT_PER_MILLE else "train"


# ----------------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------------


def _record(domain: str, text: str) -> dict:
    return {"id": f"{domain}-{hashlib.sha1(text.encode()).hexdigest()[:12]}", "domain": domain, "prompt": text}


def generate(domain: str, n: int, seed: int = 0) -> list[dict]:
    """The first n distinct prompts of a domain (both splits mixed); a larger n extends a smaller one."""
    out = [_record(domain, it.text) for it, _ in zip(_stream(domain, seed), range(n))]
    if len(out) < n:
        raise ValueError(f"{domain}: only {len(out)} distinct prompts can be generated, asked for {n}")
    return out


def build_sets(n_per_domain: int, seed: int = 0, n_heldout: int = DEFAULT_HELDOUT,
               domains: Sequence[str] = DOMAINS) -> dict[str, dict[str, list[dict]]]:
    """{domain: {"train": [...n_per_domain], "heldout": [...n_heldout]}} from one seeded stream.

    Held-out = the first n_heldout held-out prompts of the stream, so it does not depend on how many
    train prompts are asked for.
    """
    sets: dict[str, dict[str, list[dict]]] = {}
    for domain in domains:
        want = {"train": n_per_domain, "heldout": n_heldout}
        got: dict[str, list[dict]] = {"train": [], "heldout": []}
        for it in _stream(domain, seed):
            side = split_of(it.text)
            if len(got[side]) < want[side]:
                got[side].append(_record(domain, it.text))
            if all(len(got[s]) >= want[s] for s in want):
                break
        for s in want:
            if len(got[s]) < want[s]:
                raise ValueError(f"{domain}: only {len(got[s])} {s} prompts can be generated, asked for {want[s]}")
        sets[domain] = got
    return sets


def pick_demo(domain: str, k: int = DEMO_SIZE, seed: int = 0, max_chars: int = 160) -> list[dict]:
    """Short, varied held-out prompts for the demo and the benchmark: one per task, kinds in turn.

    Drawn only from Python-version-independent kinds, so the committed files can be re-made anywhere;
    of a task's phrasings the shortest is kept.
    """
    best: dict[str, _Item] = {}  # normalised key -> shortest phrasing seen
    for n, it in enumerate(_stream(domain, seed, kinds=_DEMO_KINDS[domain])):
        if n >= 400 * k:
            break
        if len(it.text) <= max_chars and split_of(it.text) == "heldout":
            key = normalise(it.text)
            if key not in best or len(it.text) < len(best[key].text):
                best[key] = it
    by_kind: dict[str, list[str]] = {}
    for it in best.values():  # dicts keep first-seen order, so this is seeded, not arbitrary
        by_kind.setdefault(it.kind, []).append(it.text)
    picked: list[str] = []
    for rnd in range(k):
        for kind in sorted(by_kind):
            if len(picked) < k and rnd < len(by_kind[kind]):
                picked.append(by_kind[kind][rnd])
    return [_record(domain, t) for t in picked]


def write_jsonl(path: str | Path, rows: Iterable[dict]) -> Path:
    """One JSON object per line (UTF-8); parent folders are created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def load_prompts(path: str | Path) -> list[dict]:
    """Read a prompts jsonl file, checking every row has id, domain and prompt."""
    rows = []
    for lineno, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        if not isinstance(row, dict) or not all(isinstance(row.get(k), str) for k in ("id", "domain", "prompt")):
            raise ValueError(f"{path}:{lineno}: expected an object with string id, domain and prompt")
        rows.append(row)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m spec.prompts", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--n", type=int, default=2000, help="train prompts per domain")
    ap.add_argument("--heldout", type=int, default=DEFAULT_HELDOUT, help="held-out prompts per domain")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--domains", default=",".join(DOMAINS), help="comma-separated subset of math,code,chat")
    ap.add_argument("--demo", action="store_true", help="write the demo prompts (OUT/<domain>.jsonl) instead")
    args = ap.parse_args(argv)
    domains = [d.strip() for d in args.domains.split(",") if d.strip()]
    out = Path(args.out)
    try:
        if args.demo:
            for d in domains:
                p = write_jsonl(out / f"{d}.jsonl", pick_demo(d, seed=args.seed))
                print(f"{p}: {DEMO_SIZE} held-out demo prompts")
            return 0
        sets = build_sets(args.n, seed=args.seed, n_heldout=args.heldout, domains=domains)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for d, sides in sets.items():
        for side, rows in sides.items():
            p = write_jsonl(out / side / f"{d}.jsonl", rows)
            print(f"{p}: {len(rows)} prompts")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
