"""Rows for the three sources `../shared/data` has no real row of (SCHEMAS.md §2, §7, §9):
APIGen-MT-5k, Llama-Nemotron chat and OpenMathReasoning. Each is written here in the
layout SCHEMAS.md documents, with content of our own, so the rehearsal reads every
source through its real normaliser. The rehearsal's SOURCES.md says which rows these are.
"""

from __future__ import annotations

import json

APIGEN_MT = [
    {"system": "You are a retail agent. Follow the domain policy: authenticate the user by email first.",
     "tools": json.dumps([
         {"name": "find_user_id_by_email", "description": "Find a user id by email.", "parameters": {
             "type": "object", "properties": {"email": {"type": "string"}}, "required": ["email"]}},
         {"name": "get_order_details", "description": "Order status and items.", "parameters": {
             "type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}},
         {"name": "think", "description": "Think before acting.", "parameters": {
             "type": "object", "properties": {"thought": {"type": "string"}}, "required": ["thought"]}}]),
     "conversations": [
         {"from": "human", "value": "Hi, where is my order #W123? My email is sam@example.com."},
         {"from": "function_call", "value": json.dumps({"name": "think", "arguments": {
             "thought": "Authenticate first, then look the order up."}})},
         {"from": "observation", "value": ""},
         {"from": "function_call", "value": json.dumps({"name": "find_user_id_by_email",
                                                        "arguments": {"email": "sam@example.com"}})},
         {"from": "observation", "value": "sam_7"},
         {"from": "function_call", "value": json.dumps({"name": "get_order_details",
                                                        "arguments": {"order_id": "#W123"}})},
         {"from": "observation", "value": json.dumps({"status": "shipped", "items": ["lamp"]})},
         {"from": "gpt", "value": "Your order #W123 (a lamp) has shipped."}]},
    {"system": "You are an airline agent. Follow the domain policy.",
     "tools": json.dumps([{"name": "get_reservation", "description": "A reservation by id.", "parameters": {
         "type": "object", "properties": {"reservation_id": {"type": "string"}}, "required": ["reservation_id"]}}]),
     "conversations": [
         {"from": "human", "value": "Is reservation ABC123 confirmed?"},
         {"from": "function_call", "value": json.dumps({"name": "get_reservation",
                                                        "arguments": {"reservation_id": "ABC123"}})},
         {"from": "observation", "value": json.dumps({"status": "confirmed", "flight": "HAT001"})},
         {"from": "gpt", "value": "Yes: ABC123 is confirmed on flight HAT001."}]},
]

NEMOTRON_CHAT = [
    {"input": "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\ndetailed thinking off<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nGive me two tips for a first marathon.<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\n",
     "output": "Build your long run slowly, and practise eating on the run before race day.<|eot_id|>",
     "category": "chat", "license": "cc-by-4.0", "reasoning": "off", "generator": "ours", "version": "v1",
     "system_prompt": "detailed thinking off"},
    {"input": [{"role": "user", "content": "What is a haiku?"},
               {"role": "assistant", "content": "A three-line poem of five, seven and five syllables."},
               {"role": "user", "content": "Write one about tea."}],
     "output": "Steam curls from the cup / a slow leaf unfolds its green / the morning waits", "category": "chat",
     "license": "cc-by-4.0", "reasoning": "off", "generator": "ours", "version": "v1.1",
     "system_prompt": "detailed thinking off"},
]

OPENMATHREASONING = [
    {"problem": "How many positive divisors does $360$ have?", "expected_answer": "24",
     "problem_type": "has_answer_extracted", "problem_source": "aops_c4_high_school_math",
     "generation_model": "DeepSeek-R1", "generated_solution": "<think>360 = 2^3 3^2 5.</think> 4*3*2 = 24.",
     "inference_mode": "cot", "pass_rate_72b_tir": "0.96875", "used_in_kaggle": False},
    {"problem": "Find the remainder when $2^{100}$ is divided by $7$.", "expected_answer": "2",
     "problem_type": "has_answer_extracted", "problem_source": "aops_c6_high_school_olympiads",
     "generation_model": "QwQ-32B", "generated_solution": "<think>2^3 = 1 mod 7.</think> 2^100 = 2 mod 7.",
     "inference_mode": "cot", "pass_rate_72b_tir": "n/a", "used_in_kaggle": False},
    {"problem": "Compute $\\sum_{k=1}^{20} k^2$.", "expected_answer": "2870",
     "problem_type": "has_answer_extracted", "problem_source": "aops_c4_high_school_math",
     "generation_model": "DeepSeek-R1", "generated_solution": "<think>n(n+1)(2n+1)/6.</think> 2870.",
     "inference_mode": "cot", "pass_rate_72b_tir": "1.0", "used_in_kaggle": True},
    {"problem": "Prove that there are infinitely many primes.", "expected_answer": "",
     "problem_type": "converted_proof", "problem_source": "aops_c6_high_school_olympiads",
     "generation_model": "DeepSeek-R1", "generated_solution": "<think>Euclid.</think>", "inference_mode": "cot",
     "pass_rate_72b_tir": "n/a", "used_in_kaggle": False},
    {"problem": "What is $7 \\times 8$?", "expected_answer": "56", "problem_type": "has_answer_extracted",
     "problem_source": "MATH_training_set", "generation_model": "DeepSeek-R1",
     "generated_solution": "<think></think> 56.", "inference_mode": "cot", "pass_rate_72b_tir": "1.0",
     "used_in_kaggle": False},
]
