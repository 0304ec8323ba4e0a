"""Measures as words: a number and its unit ('5 kg', '20 m²', '-3 °C')."""

from __future__ import annotations

import re

from pipeline.text.marks import CUBED, SQUARED
from pipeline.text.number_forms import zh_minus
from pipeline.text.numbers import amount

UNITS = {  # unit -> (English singular, plural, Chinese)
    "km": ("kilometer", "kilometers", "公里"),
    "m": ("meter", "meters", "米"),
    "cm": ("centimeter", "centimeters", "厘米"),
    "mm": ("millimeter", "millimeters", "毫米"),
    "µm": ("micrometer", "micrometers", "微米"),
    "μm": ("micrometer", "micrometers", "微米"),
    "nm": ("nanometer", "nanometers", "纳米"),
    "kg": ("kilogram", "kilograms", "公斤"),
    "g": ("gram", "grams", "克"),
    "mg": ("milligram", "milligrams", "毫克"),
    "L": ("liter", "liters", "升"),
    "ml": ("milliliter", "milliliters", "毫升"),
    "mL": ("milliliter", "milliliters", "毫升"),
    "km/h": ("kilometer per hour", "kilometers per hour", "公里每小时"),
    "m/s": ("meter per second", "meters per second", "米每秒"),
    "mph": ("mile per hour", "miles per hour", "英里每小时"),
    "°C": ("degree Celsius", "degrees Celsius", "摄氏度"),
    "°F": ("degree Fahrenheit", "degrees Fahrenheit", "华氏度"),
    "°": ("degree", "degrees", "度"),
    "KB": ("kilobyte", "kilobytes", "千字节"),
    "kB": ("kilobyte", "kilobytes", "千字节"),
    "MB": ("megabyte", "megabytes", "兆字节"),
    "GB": ("gigabyte", "gigabytes", "吉字节"),
    "TB": ("terabyte", "terabytes", "太字节"),
    "Hz": ("hertz", "hertz", "赫兹"),
    "kHz": ("kilohertz", "kilohertz", "千赫"),
    "MHz": ("megahertz", "megahertz", "兆赫"),
    "GHz": ("gigahertz", "gigahertz", "吉赫"),
    "W": ("watt", "watts", "瓦"),
    "kW": ("kilowatt", "kilowatts", "千瓦"),
    "kWh": ("kilowatt hour", "kilowatt hours", "千瓦时"),
    "V": ("volt", "volts", "伏"),
    "mAh": ("milliamp hour", "milliamp hours", "毫安时"),
    "ms": ("millisecond", "milliseconds", "毫秒"),
    "s": ("second", "seconds", "秒"),
    "sec": ("second", "seconds", "秒"),
    "secs": ("second", "seconds", "秒"),
    "µs": ("microsecond", "microseconds", "微秒"),
    "μs": ("microsecond", "microseconds", "微秒"),
    "ns": ("nanosecond", "nanoseconds", "纳秒"),
    "GB/s": ("gigabyte per second", "gigabytes per second", "吉字节每秒"),
    "MB/s": ("megabyte per second", "megabytes per second", "兆字节每秒"),
    "Gbps": ("gigabit per second", "gigabits per second", "吉比特每秒"),
    "Mbps": ("megabit per second", "megabits per second", "兆比特每秒"),
    "min": ("minute", "minutes", "分钟"),
    "h": ("hour", "hours", "小时"),
    "hr": ("hour", "hours", "小时"),
    "hrs": ("hour", "hours", "小时"),
    "lb": ("pound", "pounds", "磅"),
    "lbs": ("pound", "pounds", "磅"),
    "oz": ("ounce", "ounces", "盎司"),
    "ft": ("foot", "feet", "英尺"),
    "mi": ("mile", "miles", "英里"),
    "yd": ("yard", "yards", "码"),
}


def per_second(match: re.Match[str], language: str) -> str:
    """'3200 tokens/s' → 'three thousand two hundred tokens per second' (or '三千二百tokens每秒')."""
    digits, word = match.group(1), match.group(2)
    if language == "zh":
        return f"{amount(digits, 'zh')}{word}每秒"
    return f"{amount(digits, 'en')} {word} per second"


def unit(match: re.Match[str], language: str) -> str:
    """A sign, the number, the unit, and a power (squared or cubed) after it."""
    sign, digits, name, power = match.group(1), match.group(2), match.group(3), match.group(4) or ""
    singular, plural, chinese = UNITS[name]
    if language == "zh":
        prefix = {SQUARED: "平方", CUBED: "立方"}.get(power, "")
        return f"{zh_minus(match, sign)}{amount(digits, 'zh')}{prefix}{chinese}"
    prefix = {SQUARED: "square ", CUBED: "cubic "}.get(power, "")
    return f"{'minus ' if sign else ''}{amount(digits, 'en')} {prefix}{singular if digits == '1' else plural}"
