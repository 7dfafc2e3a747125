"""Math word problems (GSM8K-style): templates are code, their words live in assets/prompt_data.

Each template draws its numbers from `r` only (never from the cast), so the same rng state with another
cast gives the same problem with other names: a near-duplicate, by construction. A template's function
name is its kind's name, which seeds its rng: renaming one changes the prompts.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

from .data import table
from .math_cast import (
    BAKED,
    CHEAP,
    CONTAINERS,
    EXPENSES,
    ITEMS,
    PEOPLE,
    PLACES,
    PRICEY,
    Person,
)

OPENERS: list[str] = table("math.json")["openers"]
ASKS: list[str] = table("math.json")["asks"]


@dataclass(frozen=True)
class Cast:
    p: Person
    q: Person
    s: Person
    item: tuple[str, str]
    cheap: tuple[str, str]
    pricey: str
    box: str
    baked: str
    expense: str
    place: str


def draw_cast(r: random.Random) -> Cast:
    p, q, s = r.sample(PEOPLE, 3)
    return Cast(p, q, s, r.choice(ITEMS), r.choice(CHEAP), r.choice(PRICEY), r.choice(CONTAINERS),
                r.choice(BAKED), r.choice(EXPENSES), r.choice(PLACES))


def _money(x: Fraction | int) -> str:
    x = Fraction(x)
    return f"${x.numerator // x.denominator}" if x.denominator == 1 else f"${float(x):.2f}"


def _pl(n: int, word: str, plural: str | None = None) -> str:
    """'1 hour', '3 hours'."""
    return f"{n} {word}" if n == 1 else f"{n} {plural or word + 's'}"


def _num(x: Fraction | int) -> str:
    x = Fraction(x)
    return str(x.numerator) if x.denominator == 1 else f"{float(x):g}"


Template = Callable[[random.Random, Cast], "tuple[str, Fraction]"]
TEMPLATES: dict[str, Template] = {}


def _math(fn: Template) -> Template:
    TEMPLATES[fn.__name__] = fn
    return fn


@_math
def add_more(r, c):
    a, b = r.randint(5, 80), r.randint(2, 50)
    i = c.item[1]
    return (f"{c.p.name} has {a} {i}. {c.p.He} buys {b} more at the store. "
            f"How many {i} does {c.p.name} have now?"), Fraction(a + b)


@_math
def give_away(r, c):
    a = r.randint(20, 150)
    b = r.randint(2, a - 5)
    i = c.item[1]
    return (f"{c.p.name} had {a} {i} and gave {b} of them to {c.q.name}. "
            f"How many {i} does {c.p.name} have left?"), Fraction(a - b)


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
    return (f"A train travels at {v} kilometers per hour. "
            f"How far does it travel in {when}?"), v * (t + Fraction(mins, 60))


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
            f"each week on {c.expense} and saves the rest. "
            f"How much does {c.p.he} save in {k} weeks?"), Fraction((w * h - s) * k)


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
    return (f"{c.p.name} scored {s1}, {s2} and {s3} on three math tests. "
            f"What is {c.p.his} average score?"), Fraction(s1 + s2 + s3, 3)


@_math
def fence_cost(r, c):
    l, w, cost = r.randint(5, 40), r.randint(3, 30), r.randint(2, 15)
    return (f"A rectangular garden is {l} meters long and {w} meters wide. {c.p.name} wants to put a fence "
            f"around it. Fencing costs {_money(cost)} per meter. "
            f"How much will the fence cost?"), Fraction(2 * (l + w) * cost)


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
            f"and saves {_money(w)} each week. "
            f"How many weeks will it take {c.p.him} to have enough money?"), Fraction(n)


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
    return (f"{c.p.name} has {q} quarters, {d} dimes and {n} nickels. "
            f"How much money does {c.p.he} have, in cents?"), Fraction(25 * q + 10 * d + 5 * n)


@_math
def vacation_days(r, c):
    w, d = r.randint(2, 10), r.randint(1, 6)
    return (f"{c.p.name}'s summer vacation lasts {w} weeks and {_pl(d, 'day')}. "
            f"How many days is that in total?"), Fraction(7 * w + d)


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
    return (f"A pack of {k} {c.cheap[1]} costs {_money(p * k)}. "
            f"How much do {n} {c.cheap[1]} cost at the same price?"), p * n


# The simplest templates: the math demo prompts come only from these.
SIMPLE = ("add_more", "give_away", "boxes", "share_equally", "buy_price", "movie_minutes",
          "reading_days", "vacation_days", "km_to_m", "three_days")


def prompt(r: random.Random, name: str) -> str:
    cast = draw_cast(r)
    text, _ = TEMPLATES[name](r, cast)
    return r.choice(OPENERS) + text + " " + r.choice(ASKS)
